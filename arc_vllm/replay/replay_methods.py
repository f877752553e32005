"""The same agent logs through several context policies, side by side.

    arc-vllm replay LOGS --methods arc,swe_agent_last_n,openhands_masking,openhands_window,\
        sliding_window,full_context --context-window 16384 --max-tokens 1024 --out DIR

Every method gets the same steps through the policy protocol (``policies/base.py``), in the
same ARC-harness text format, with the log's own system prompt. Before each step the
method's prompt is counted in real tokens of the serving model's template; a prompt over
the window is counted as the engine would see it: a refused call, after which a method that
reacts to refusals (``on_overflow``: ARC, sliding_window, openhands_window) gets one try to
shrink. Per method it reports prompt tokens (total and per step), calls over the window,
prefix-reusable tokens (whole 128-token blocks shared with the previous prompt: what vLLM's
prefix cache can reuse), the observations still exactly recoverable from what the method
keeps at the end (ARC: every stored one, by id; maskers and windows: those still shown
whole), and the roofline cost of the whole replay (prefill FLOPs and decode HBM traffic,
Qwen3-8B on H200, the agent's own action as the generated tokens).

Writes DIR/<method>/summary.json and DIR/summary.md.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from arc_vllm.core import formats
from arc_vllm.core.context import arc_system
from arc_vllm.kv.spans import prefix_hit
from arc_vllm.policies import MODEL_POLICIES, POLICIES
from arc_vllm.policies.base import ContextOverflow, agent_system
from arc_vllm.replay.importers import read_all
from arc_vllm.replay.replay import PREFIX_BLOCK_TOKENS

logger = logging.getLogger(__name__)

REACTIVE = ("arc", "sliding_window", "openhands_window")


def make(method: str, counter, config, trajectory):
    system = agent_system(trajectory.system)  # every method's agent: the same prompt
    if method == "arc":  # ... and ARC's note after it
        return POLICIES[method](counter, config.input_budget_tokens, task=trajectory.task,
                                config=config, system=arc_system(system))
    return POLICIES[method](counter, config.input_budget_tokens, task=trajectory.task, system=system)


def recoverable(method: str, policy, messages: list[dict], observations: list[str]) -> int:
    """Observations the agent can still get back exactly from what the method keeps."""
    if method == "arc":
        stored = {record.content for record in policy.context.store.records()}
        return sum(1 for text in observations if text in stored)
    if hasattr(policy, "recoverable"):
        return policy.recoverable()
    shown = "\n".join(message.get("content") or "" for message in messages)
    return sum(1 for text in observations if not text or text in shown)  # empty: nothing lost


def replay_method(method: str, trajectory, config, counter) -> dict:
    from arc_vllm.cost.roofline import Call

    budget = config.input_budget_tokens
    policy = make(method, counter, config, trajectory)
    calls, previous, observations = [], None, []
    messages: list[dict] = []
    over = refused = 0
    for step in trajectory.steps:
        messages = policy.render()
        tokens = counter.count_messages(messages)
        if tokens > budget and method in REACTIVE:
            refused += 1  # the engine refuses it; the method shrinks once
            try:
                policy.on_overflow(f"prompt of {tokens} tokens over {budget}")
                messages = policy.render()
                tokens = counter.count_messages(messages)
            except ContextOverflow:
                pass
        over += tokens > budget
        ids = counter.prompt_token_ids(messages)
        calls.append({"prompt_tokens": tokens, "reusable": prefix_hit(previous, ids, PREFIX_BLOCK_TOKENS),
                      "generated": counter.count(formats.react_action(step.thought, step.action))})
        previous = ids
        policy.observe(step.action, step.observation, thought=step.thought,
                       returncode=step.returncode)
        observations.append(step.observation)
    messages = policy.render()
    return {"steps": len(calls), "observations": len(observations), "over_budget_calls": over,
            "refused_calls": refused, "calls": calls,
            "exactly_recoverable": recoverable(method, policy, messages, observations),
            "roofline_calls": [Call(c["prompt_tokens"], c["generated"]) for c in calls]}


def summarize(method: str, results: list[dict], config, skipped: list[dict]) -> dict:
    from arc_vllm.cost.roofline import Hardware, Model, roofline

    calls = [call for result in results for call in result["calls"]]
    prompt = sum(call["prompt_tokens"] for call in calls)
    reusable = sum(call["reusable"] for call in calls)
    cost = roofline([c for r in results for c in r["roofline_calls"]], 1,
                    Model.named("Qwen3-8B"), Hardware.named("H200"))
    return {"method": method, "budget_tokens": config.input_budget_tokens,
            "trajectories": len(results), "skipped_trajectories": skipped,
            "steps": len(calls), "observations": sum(r["observations"] for r in results),
            "exactly_recoverable": sum(r["exactly_recoverable"] for r in results),
            "over_budget_calls": sum(r["over_budget_calls"] for r in results),
            "refused_calls": sum(r["refused_calls"] for r in results),
            "max_prompt_tokens": max((c["prompt_tokens"] for c in calls), default=0),
            "prompt_tokens_total": prompt,
            "prompt_tokens_per_step": round(prompt / len(calls), 1) if calls else 0,
            "prefix_reusable_tokens_total": reusable, "prefix_block_tokens": PREFIX_BLOCK_TOKENS,
            "prefix_reusable_share": round(reusable / prompt, 4) if prompt else 0,
            # Each trajectory's prompt tokens per step (the report draws them side by side).
            "per_trajectory": [{"id": r["id"], "prompt_tokens": [c["prompt_tokens"] for c in r["calls"]]}
                               for r in results],
            "roofline": {"model": cost["model"], "hardware": cost["hardware"],
                         "prefill_flops": cost["prefill_flops"], "decode_bytes": cost["decode_bytes"],
                         "prefill_s": cost["prefill_s"], "decode_s": cost["decode_s"]}}


def table(summaries: list[dict]) -> str:
    rows = ["| method | steps | calls over window | prompt tokens (per step) | prefix-reusable "
            "| recoverable exactly | prefill PFLOPs | decode HBM TB (H200, Qwen3-8B) |",
            "|---|---|---|---|---|---|---|---|"]
    for s in summaries:
        rows.append(f"| {s['method']} | {s['steps']} | {s['over_budget_calls']} | "
                    f"{s['prompt_tokens_total']:,} ({s['prompt_tokens_per_step']:,.0f}) | "
                    f"{100 * s['prefix_reusable_share']:.0f}% | {s['exactly_recoverable']} / "
                    f"{s['observations']} | {s['roofline']['prefill_flops'] / 1e15:.1f} | "
                    f"{s['roofline']['decode_bytes'] / 1e12:.2f} |")
    return "\n".join(rows)


def run(paths, out: str, config, tokenizer: str | None, methods: list[str],
        format: str | None = None) -> list[dict]:
    from arc_vllm.core.tokens import load_counter

    unknown = [m for m in methods if m not in POLICIES or m in MODEL_POLICIES]
    if unknown:
        raise ValueError(f"--methods: {', '.join(unknown)} cannot replay logs (available: "
                         f"{', '.join(m for m in POLICIES if m not in MODEL_POLICIES)})")
    loaded = read_all([paths] if isinstance(paths, (str, Path)) else paths, format)
    for error in loaded.errors:
        logger.warning("%s", error)
    counter = load_counter(tokenizer)
    summaries = []
    for method in methods:
        results, skipped = [], []
        for trajectory in loaded.trajectories:
            try:
                results.append({**replay_method(method, trajectory, config, counter),
                                "id": trajectory.id})
            except (ValueError, ContextOverflow) as error:  # a task prefix too large to start
                skipped.append({"id": trajectory.id, "reason": str(error)})
        summary = summarize(method, results, config, skipped)
        folder = Path(out) / method
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "summary.json").write_text(json.dumps(summary, indent=1))
        logger.info("%s: %d calls over the window, %d/%d recoverable", method,
                    summary["over_budget_calls"], summary["exactly_recoverable"], summary["observations"])
        summaries.append(summary)
    (Path(out) / "summary.md").write_text(table(summaries) + "\n")
    return summaries
