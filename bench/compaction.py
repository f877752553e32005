"""The low-water mark's frontier: what a compaction costs the prefix cache, by how far it cuts.

    .venv/bin/python bench/compaction.py [--out runs/bench/compaction.json] [--percents 50,60,70,80,90,100]
                                         [--recent-kept 50]

Replays the sample agent logs (``tests/fixtures/agent_logs``: SWE-agent, mini-swe-agent,
OpenHands, tau-bench and ARC's own format) through ARC with the embedded model's tokenizer, at
4k, 16k and 32k windows, once for each ``compact_to_percent`` (the share of L a compaction cuts
the view to: ``--arc-compact-to-percent``), and prints for each: compactions per 100 steps,
the uncached prefill against its floor (the tokens new at each step) without and with KV
reuse, the mean view after the first compaction as a share of L, calls over budget, and the
observations recalled exactly; with ``--recent-kept``, also for each ``recent_kept_percent``
(how much of H's cap a compaction keeps: ``--arc-recent-kept-percent``). Writes the figures as JSON. docs/replay.md shows the table and
the default chosen from it.
"""

from __future__ import annotations

import argparse
import platform
import sys
from itertools import product
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from arc_vllm.offline import go_offline  # noqa: E402

go_offline()

from results import write_results  # noqa: E402  (bench/results.py, beside this script)
from arc_vllm.core.config import ArcConfig  # noqa: E402
from arc_vllm.core.tokens import load_counter  # noqa: E402
from arc_vllm.replay.importers import read_all  # noqa: E402
from arc_vllm.replay.replay import replay_one, summarize  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
WINDOWS = [(4096, 512), (16384, 1024), (32768, 1024)]


def measure(trajectories, config: ArcConfig, counter) -> dict:
    results = [replay_one(trajectory, config, counter) for trajectory in trajectories]
    summary = summarize(results, config, counter.name, [])
    uncached = summary["uncached_prefill_tokens"]
    return {"steps": summary["steps"], "compactions": summary["compactions"],
            "compactions_per_100_steps": summary["compactions_per_100_steps"],
            "uncached_vs_floor": uncached["without_kv_reuse_vs_floor"],
            "uncached_vs_floor_kv_reuse": uncached["with_kv_reuse_vs_floor"],
            "mean_view_after_first_compaction": summary["mean_view_after_first_compaction"],
            "over_budget_calls": summary["over_budget_calls"],
            "observations": summary["observations"], "observations_exact": summary["exactly_recoverable"]}


def numbers(text: str) -> list[int]:
    return [int(value) for value in text.split(",")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="runs/bench/compaction.json")
    parser.add_argument("--percents", default="50,60,70,80,90,100",
                        help="the compact_to_percent values to replay (comma-separated)")
    parser.add_argument("--recent-kept", default=str(ArcConfig.default_of("recent_kept_percent")),
                        help="the recent_kept_percent values to replay (comma-separated)")
    args = parser.parse_args()
    counter = load_counter(None)
    trajectories = read_all([ROOT / "tests" / "fixtures" / "agent_logs"]).trajectories
    figures = {}
    print(f"{'window':>7} {'compact to':>10} {'H kept':>6} {'per 100 steps':>13} {'uncached/floor':>14} {'(KV reuse)':>10} "
          f"{'mean view':>9} {'over':>4} {'exact obs':>9}", flush=True)
    for window, max_tokens in WINDOWS:
        for percent, kept in product(numbers(args.percents), numbers(args.recent_kept)):
            config = ArcConfig.for_window(window, max_tokens, compact_to_percent=percent, recent_kept_percent=kept)
            row = figures[f"{window}/{percent}/{kept}"] = measure(trajectories, config, counter)
            print(f"{window:>7} {percent:>9}% {kept:>5}% {row['compactions_per_100_steps']:>13.1f} {row['uncached_vs_floor']:>14.3f} "
                  f"{row['uncached_vs_floor_kv_reuse']:>10.3f} {row['mean_view_after_first_compaction']:>9.3f} "
                  f"{row['over_budget_calls']:>4} {row['observations_exact']:>4}/{row['observations']:<4}", flush=True)
    write_results({"tokenizer": counter.name, "trajectories": len(trajectories),
                   "default_compact_to_percent": ArcConfig.for_window(4096).compact_to_percent,
                   "default_recent_kept_percent": ArcConfig.for_window(4096).recent_kept_percent,
                   "machine": platform.processor() or platform.machine(), "figures": figures}, args.out)


if __name__ == "__main__":
    main()
