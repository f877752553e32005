"""A reasoning model's thinking through ARC, as vLLM's prefix cache sees it: the sample replays
with and without thinking.

    .venv/bin/python bench/thinking.py [--out runs/bench/thinking.json] [--chars 300]

Replays the sample agent logs (``tests/fixtures/agent_logs``: SWE-agent, mini-swe-agent,
OpenHands, tau-bench and ARC's own format) through ARC with Qwen3's tokenizer and chat template
(the tiny Qwen3-format model's, ``arc_vllm/reasoning_model.py``: the template renders the
thinking of the current tool loop, so thinking costs prompt tokens), at 4k and 16k windows,
twice: as the logs are, and with a thought of about ``--chars`` characters before every step
(deterministic: its step and the action it leads to, then filler words), and prints for each:
the prompt tokens over all calls, the share vLLM's prefix cache could reuse from the previous
call (whole 128-token blocks), the uncached prefill against its floor (what is new at each
step), compactions, calls over budget, and the observations and thoughts recalled exactly.
Writes the figures as JSON.
"""

from __future__ import annotations

import argparse
import platform
import random
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from arc_vllm.offline import go_offline  # noqa: E402

go_offline()

from results import write_results  # noqa: E402  (bench/results.py, beside this script)
from arc_vllm.core.config import ArcConfig  # noqa: E402
from arc_vllm.core.tokens import HFTokenCounter  # noqa: E402
from arc_vllm.reasoning_model import prepare  # noqa: E402
from arc_vllm.replay.importers import read_all  # noqa: E402
from arc_vllm.replay.replay import replay_one, summarize  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
WINDOWS = [(4096, 512), (16384, 1024)]
WORDS = ("the failing request is in the log so I compare the latency of each retry and check the "
         "config before I change the handler next").split()


def thought(step: int, action: str, chars: int, rng: random.Random) -> str:
    """A thought before ``action``: what it will do, then words to about ``chars`` characters."""
    text = f"Step {step}: next I run {action[:80]!r} because "
    while len(text) < chars:
        text += rng.choice(WORDS) + " "
    return text.strip()


def with_thinking(trajectories, chars: int):
    rng = random.Random(7)
    return [replace(trajectory, steps=[replace(step, reasoning=thought(index, step.action, chars, rng))
                                       for index, step in enumerate(trajectory.steps, 1)])
            for trajectory in trajectories]


def measure(trajectories, config: ArcConfig, counter) -> dict:
    results = [replay_one(trajectory, config, counter) for trajectory in trajectories]
    summary = summarize(results, config, counter.name, [])
    prompt = summary["prompt_tokens_total"]
    uncached = summary["uncached_prefill_tokens"]
    return {"steps": summary["steps"], "compactions": summary["compactions"],
            "over_budget_calls": summary["over_budget_calls"], "prompt_tokens": prompt,
            "prefix_reusable_share": round(summary["prefix_reusable_tokens_total"] / max(prompt, 1), 3),
            "uncached_vs_floor": uncached["without_kv_reuse_vs_floor"],
            "uncached_vs_floor_kv_reuse": uncached["with_kv_reuse_vs_floor"],
            "observations": summary["observations"], "observations_exact": summary["exactly_recoverable"],
            "thoughts": sum(result["thoughts"] for result in results),
            "thoughts_exact": sum(result["thoughts_exactly_recoverable"] for result in results),
            "history_rebuilds_exactly": summary["history_rebuilds_exactly"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="runs/bench/thinking.json")
    parser.add_argument("--chars", type=int, default=300, help="characters of each step's thought")
    args = parser.parse_args()
    counter = HFTokenCounter(str(prepare("qwen3")))
    trajectories = read_all([ROOT / "tests" / "fixtures" / "agent_logs"]).trajectories
    runs = {"without": trajectories, "with": with_thinking(trajectories, args.chars)}
    figures = {}
    print(f"{'window':>7} {'thinking':>8} {'steps':>6} {'compactions':>11} {'over':>4} {'prompt tokens':>13} "
          f"{'reusable':>8} {'uncached/floor':>14} {'(KV reuse)':>10} {'exact obs':>9} {'exact thoughts':>14}")
    for window, max_tokens in WINDOWS:
        config = ArcConfig.for_window(window, max_tokens)
        for name, runs_of in runs.items():
            row = figures[f"{window}/{name}"] = measure(runs_of, config, counter)
            print(f"{window:>7} {name:>8} {row['steps']:>6} {row['compactions']:>11} {row['over_budget_calls']:>4} "
                  f"{row['prompt_tokens']:>13,} {row['prefix_reusable_share']:>8.3f} {row['uncached_vs_floor']:>14.3f} "
                  f"{row['uncached_vs_floor_kv_reuse']:>10.3f} {row['observations_exact']:>4}/{row['observations']:<4} "
                  f"{row['thoughts_exact']:>6}/{row['thoughts']:<6}")
    write_results({"tokenizer": "Qwen3's (arc-tiny-qwen3-32k)", "thought_chars": args.chars,
                   "machine": platform.processor() or platform.machine(), "figures": figures}, args.out)


if __name__ == "__main__":
    main()
