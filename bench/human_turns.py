"""Where the user's own messages go in a compacted view: after the task prefix (W, ARC's
choice) or at their step inside the summary S. Measured as vLLM's prefix cache would see it.

    .venv/bin/python bench/human_turns.py [--out runs/bench/human_turns.json]

Replays, through ARC with the embedded model's tokenizer, every conversation of the samples
that has human turns (tau-bench's results in tests/fixtures/agent_logs: native tool calls, a
user speaking every few steps) and a long Claude-Code-shaped session made here (300 tool
calls, 25 user messages of 40 to 3,000 characters, one of them a pasted log of half the
window in characters, seed 7), at 4k and 16k windows, both ways:

    after-F     Serialize(F, W, S, G, H, U): every human turn that left H in one message after F
    in-summary  Serialize(F, S, G, H, U) with each of those turns' entry at its step in S

and prints, for each, the prompt tokens over all calls, the share vLLM's prefix cache could
reuse from the previous call (whole 128-token blocks), the uncached tokens, and the calls
whose view shows every human turn whole or by its head (all of them, both ways: the bodies
and the caps are the same; only the place differs). Writes the figures as JSON.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from arc_vllm.offline import go_offline  # noqa: E402

go_offline()

from arc_vllm.core import formats  # noqa: E402
from results import write_results  # noqa: E402  (bench/results.py, beside this script)
from arc_vllm.core.compaction import BARE, FULL  # noqa: E402
from arc_vllm.core.config import ArcConfig  # noqa: E402
from arc_vllm.core.context import ArcContext, arc_system  # noqa: E402
from arc_vllm.core.tokens import load_counter  # noqa: E402
from arc_vllm.core.transcript import HUMAN_SIGNATURE, Step, call_signature  # noqa: E402
from arc_vllm.core.turn import CHAT, TOOL, VERBATIM, ToolCall  # noqa: E402
from arc_vllm.kv.spans import prefix_hit  # noqa: E402
from arc_vllm.policies.base import agent_system  # noqa: E402
from arc_vllm.replay.importers import read  # noqa: E402
from arc_vllm.replay.replay import PREFIX_BLOCK_TOKENS, apply_step  # noqa: E402
from arc_vllm.replay.trajectory import Trajectory  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
WINDOWS = [(4096, 512), (16384, 1024)]


class InSummary(ArcContext):
    """The other placement: W's entries inside S, each at its step, in place of S's line for
    that step; no message of its own. The same bodies, forms and caps as W."""

    def _humans_and_summary(self):
        (_, humans_tokens), (summary, summary_tokens) = super()._humans_and_summary()
        if not humans_tokens:
            return ("", 0), (summary, summary_tokens)
        state, turns = self.state, self.turns
        parts = [formats.SUMMARY_HEADER]
        if state.elided:
            parts.append(formats.SUMMARY_ELIDED)
        left_out = set(self.humans.in_w(state.boundary)[:self.humans.elided])
        for index in range(state.boundary):
            turn = turns[index]
            if turn.human:
                if index not in left_out:
                    parts.append(self.humans.entry(index, turn, self.humans.forms.get(index, VERBATIM))[0])
            elif index >= state.elided:
                parts.append(self.summarizer.entry(index, turn, BARE if index < state.collapsed else FULL)[0])
        text = "\n".join(parts)
        if self.note and self.has_acted:
            text = f"{self.note}\n\n{text}"
        return ("", 0), (text, summary_tokens + humans_tokens)


def claude_code_shaped(paste_chars: int, seed: int = 7, tool_calls: int = 300) -> Trajectory:
    """A long native tool loop with a person speaking now and then, as Claude Code sends it;
    one of them pastes a log of ``paste_chars`` characters (the newest user message is always
    whole, so a paste must fit the window)."""
    rng = random.Random(seed)
    words = "the retry budget config prod yaml never touch tests keep run file error fix spec".split()
    steps, asked = [], 0
    for number in range(tool_calls):
        if number % 12 == 5:  # the assistant answers, the user writes
            length = rng.choice([40, 200, 800, 3000])
            text = ("IMPORTANT: " if asked % 3 == 0 else "") + " ".join(rng.choice(words) for _ in range(length // 5))
            if asked == 9:
                text = ("Here is the failing log, look at it:\n" + "".join(
                    f"2026-12-03T10:{index // 60 % 60:02d}:{index % 60:02d} worker-{index % 7} GET /api/{index} 200\n"
                    for index in range(paste_chars // 50)))[:paste_chars]
            steps.append(Step(f"Done with part {asked}.", text, style=CHAT, human=True,
                              signature=HUMAN_SIGNATURE))
            asked += 1
        call = ToolCall(f"toolu_{number}", "Bash", json.dumps({"command": f"cat src/module_{number}.py"}))
        body = "\n".join(f"line {line}: {rng.choice(words)} {rng.random():.6f}"
                         for line in range(rng.choice([2, 20, 80, 200])))
        steps.append(Step(call_signature(call), body, style=TOOL, call=call, group=number))
    return Trajectory("claude-code-shaped", "Fix the flaky retry in the worker and keep the tests green.",
                      steps, system="You are a coding agent. " * 120)


def replay(trajectory: Trajectory, config: ArcConfig, counter, kind) -> dict:
    context = kind(config, counter, task=trajectory.task, system=arc_system(agent_system(trajectory.system)))
    previous, prompt, reusable, whole = None, 0, 0, 0
    for step in trajectory.steps:
        view = context.render()
        ids = counter.prompt_token_ids(view.messages)
        prompt += len(ids)
        reusable += prefix_hit(previous, ids, PREFIX_BLOCK_TOKENS)
        previous = ids
        humans = view.human_turns
        whole += humans.get("left_out", 0) == 0  # every human turn in it, whole or by its head
        apply_step(context, step)
    return {"calls": len(trajectory.steps), "prompt_tokens": prompt, "prefix_reusable_tokens": reusable,
            "uncached_tokens": prompt - reusable, "calls_with_every_human_turn": whole,
            "compactions": context.num_compactions}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="runs/bench/human_turns.json")
    args = parser.parse_args()
    counter = load_counter(None)
    logs = [trajectory for trajectory in read(ROOT / "tests/fixtures/agent_logs/tau_bench_results.json").trajectories
            if any(step.human for step in trajectory.steps)]
    samples = {"tau-bench (3 conversations)": lambda window: logs,
               "claude-code-shaped": lambda window: [claude_code_shaped(window // 2)]}
    results = []
    print(f"{'sample':28} {'window':>7} {'placement':11} {'prompt':>9} {'reusable':>9} {'share':>6} "
          f"{'uncached':>9} {'every human turn':>17}")
    for name, trajectories in samples.items():
        for window, max_tokens in WINDOWS:
            config = ArcConfig.for_window(window, max_tokens)
            for placement, kind in (("after-F", ArcContext), ("in-summary", InSummary)):
                runs = [replay(trajectory, config, counter, kind) for trajectory in trajectories(window)]
                total = {key: sum(run[key] for run in runs) for key in runs[0]}
                share = total["prefix_reusable_tokens"] / max(1, total["prompt_tokens"])
                results.append({"sample": name, "window": window, "max_tokens": max_tokens,
                                "placement": placement, **total, "prefix_reusable_share": round(share, 4)})
                print(f"{name:28} {window:>7} {placement:11} {total['prompt_tokens']:>9,} "
                      f"{total['prefix_reusable_tokens']:>9,} {share:>6.3f} {total['uncached_tokens']:>9,} "
                      f"{total['calls_with_every_human_turn']:>8}/{total['calls']}")
    write_results({"machine": platform.machine(), "tokenizer": counter.name, "results": results}, args.out)


if __name__ == "__main__":
    main()
