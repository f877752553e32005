"""Benchmarks of the ARC core: store append throughput, render + compaction latency, memory.

    .venv/bin/python bench/core.py [--quick] [--out runs/bench/core.json]

Prints a table and writes JSON:
- ObsStore.append throughput for 1 KiB, 64 KiB and 1 MiB observations (ASCII tool output,
  and one row of mixed Unicode), as a ratio to plain hashlib SHA1 over the same UTF-8 bytes
  in the same run (target >= 0.5);
- render + compaction latency (p50/p99 over the last 200 renders) for histories of 100,
  1,000 and 10,000 steps at 16k and 32k windows, with the embedded model's tokenizer
  (target: p50 <= 10 ms at 1,000 steps and 16k; growth well below linear in history);
- compaction latency on real-format agent logs (the SWE-agent, mini-swe-agent, OpenHands and
  tau-bench fixtures in tests/fixtures/agent_logs, each replayed alone, plus one long session
  of all their steps three times over; 16k window; target p99 <= 30 ms), beside the one-off
  cost of archiving and counting each new observation;
- store memory per stored payload byte (tracemalloc).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import platform
import random
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from arc_vllm.offline import go_offline  # noqa: E402

go_offline()

from arc_vllm.core.config import ArcConfig  # noqa: E402
from results import write_results  # noqa: E402  (bench/results.py, beside this script)
from arc_vllm.core.context import ArcContext  # noqa: E402
from arc_vllm.core.store import ObsStore  # noqa: E402
from arc_vllm.core.tokens import load_counter  # noqa: E402


def random_text(rng: random.Random, size: int, unicode: bool = False) -> str:
    words = ["alpha", "beta", "gamma", "delta", "0x1f", "error:", "ok", "\n", "build/",
             "test_", "=", "42"] + (["é", "漢字", "😀"] if unicode else [])
    parts, length = [], 0
    while length < size:
        word = rng.choice(words)
        parts.append(word + " ")
        length += len(word) + 1
    return "".join(parts)[:size]


def bench_append(size: int, total_bytes: int, rng: random.Random, unicode: bool = False) -> dict:
    count = max(20, total_bytes // size)
    base = random_text(rng, size, unicode)
    # Distinct observations (each a new id) of exactly `size` ASCII characters.
    observations = [f"{i:08d}" + base[8:] for i in range(count)]
    encoded = [(b"cat file", observation.encode()) for observation in observations]
    best_store, best_hash = float("inf"), float("inf")
    for _ in range(3):
        store = ObsStore()
        started = time.perf_counter()
        for step, observation in enumerate(observations):
            store.append("cat file", observation, step=step)
        best_store = min(best_store, time.perf_counter() - started)
        started = time.perf_counter()
        for signature, body in encoded:
            hashlib.sha1(signature + b"\x1f" + body).hexdigest()
        best_hash = min(best_hash, time.perf_counter() - started)
    megabytes = sum(len(body) for _, body in encoded) / 2**20
    return {"size_chars": size, "text": "unicode" if unicode else "ascii", "observations": count,
            "store_mb_s": round(megabytes / best_store, 1),
            "sha1_mb_s": round(megabytes / best_hash, 1),
            "ratio_to_sha1": round(best_hash / best_store, 3)}


def bench_render(steps: int, window: int, counter, rng: random.Random) -> dict:
    config = ArcConfig.for_window(window, 1024)
    context = ArcContext(config, counter, task="Keep the service healthy; report anomalies.")
    measured, compaction = [], []
    first_measured = max(0, steps - 200)
    for step in range(steps):
        size = rng.choice([80, 400, 1500, 4000, 12000])
        context.observe(f"run check_{step % 50}", random_text(rng, size), thought="Next check.",
                        returncode=0)
        started = time.perf_counter()
        view = context.render()
        elapsed = (time.perf_counter() - started) * 1000
        if step >= first_measured:
            measured.append(elapsed)
            if view.compacted:
                compaction.append(elapsed)
        assert view.tokens <= config.input_budget_tokens
    measured.sort()
    return {"steps": steps, "window": window, "renders_measured": len(measured),
            "p50_ms": round(statistics.median(measured), 3),
            "p99_ms": round(measured[min(len(measured) - 1, int(0.99 * len(measured)))], 3),
            "compactions_measured": len(compaction),
            "compaction_p50_ms": round(statistics.median(compaction), 3) if compaction else None}


def bench_real_logs(window: int, counter) -> dict:
    from arc_vllm.replay.importers import read_all
    from arc_vllm.replay.replay import replay_one
    from arc_vllm.reports.stats import percentile
    from arc_vllm.replay.trajectory import Trajectory

    logs = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "agent_logs"
    trajectories = read_all([logs]).trajectories
    # One long session: every fixture's steps, three times, under mini-swe-agent's prompt.
    base = next(t for t in trajectories if t.id == "mini_swe_agent")
    steps = [step for _ in range(3) for t in trajectories for step in t.steps]
    trajectories.append(Trajectory("long-mixed-session", base.task, steps, system=base.system))
    config = ArcConfig.for_window(window, 1024)
    calls = [call for trajectory in trajectories
             for call in replay_one(trajectory, config, counter)["calls"]]
    compaction = [call["render_ms"] for call in calls if call["compacted"]]
    observe = [call["observe_ms"] for call in calls]
    return {"window": window, "trajectories": len(trajectories), "steps": len(calls),
            "max_observation_chars": max(len(s.observation) for t in trajectories for s in t.steps),
            "over_budget_calls": sum(call["prompt_tokens"] > config.input_budget_tokens for call in calls),
            "compactions": len(compaction),
            "compaction_p50_ms": round(percentile(compaction, 0.5), 3),
            "compaction_p99_ms": round(percentile(compaction, 0.99), 3),
            "observe_p50_ms": round(percentile(observe, 0.5), 3),
            "observe_p99_ms": round(percentile(observe, 0.99), 3)}


def bench_memory(rng: random.Random) -> dict:
    observations = [random_text(rng, 64 * 1024) + f"{i}" for i in range(200)]
    payload = sum(len(observation.encode()) for observation in observations)
    tracemalloc.start()
    store = ObsStore()
    for step, observation in enumerate(observations):
        store.append("cat", observation, step=step)
    overhead, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    # The bodies are the caller's strings, kept by reference; what the store allocates on top
    # is its metadata and previews. Total per stored byte = (payload + overhead) / payload.
    return {"observations": len(observations), "payload_bytes": payload,
            "store_overhead_bytes": overhead,
            "bytes_per_payload_byte": round((payload + overhead) / payload, 4)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller runs (for a smoke test)")
    parser.add_argument("--out", default="runs/bench/core.json")
    parser.add_argument("--steps", type=int, nargs="*", help="history lengths (default 100 1000 10000)")
    parser.add_argument("--windows", type=int, nargs="*", help="context windows (default 16384 32768)")
    args = parser.parse_args()
    rng = random.Random(0)
    counter = load_counter(None)
    results = {"machine": {"cpu_count": os.cpu_count(), "python": platform.python_version(),
                           "processor": platform.processor() or platform.machine()},
               "tokenizer": counter.name, "append": [], "render": []}
    total = 8 * 2**20 if args.quick else 64 * 2**20
    for size, unicode in ((1024, False), (64 * 1024, False), (2**20, False), (64 * 1024, True)):
        row = bench_append(size, total, rng, unicode)
        results["append"].append(row)
        print(f"append {size:>8} chars {row['text']:>7}: store {row['store_mb_s']:>8} MB/s  sha1 {row['sha1_mb_s']:>8} "
              f"MB/s  ratio {row['ratio_to_sha1']}")
    step_counts = args.steps or ((100, 1000) if args.quick else (100, 1000, 10000))
    for window in args.windows or (16384, 32768):
        for steps in step_counts:
            row = bench_render(steps, window, counter, rng)
            results["render"].append(row)
            print(f"render {steps:>6} steps @ {window:>5}: p50 {row['p50_ms']:>7} ms  "
                  f"p99 {row['p99_ms']:>7} ms  (compactions {row['compactions_measured']}, "
                  f"p50 {row['compaction_p50_ms']} ms)")
    for window in (16384,) if args.quick else (16384, 32768):
        row = bench_real_logs(window, counter)
        results.setdefault("real_logs", []).append(row)
        print(f"real-format logs @ {window}: {row['steps']} steps, {row['compactions']} compactions: "
              f"p50 {row['compaction_p50_ms']} ms  p99 {row['compaction_p99_ms']} ms; archiving + "
              f"counting a new observation p50 {row['observe_p50_ms']} ms  p99 {row['observe_p99_ms']} ms")
    results["memory"] = bench_memory(rng)
    print(f"memory: {results['memory']['bytes_per_payload_byte']} bytes per stored payload byte")
    write_results(results, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
