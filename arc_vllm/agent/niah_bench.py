"""The scripted Needle-in-a-Haystack benchmark: methods x seeds x tasks into results.jsonl.

Every attempt is one line of DIR/results.jsonl (method, seed, task, passed, answered,
crashed, calls, prompt tokens, wall time); a rerun skips the attempts already there, so an
interrupted run continues where it stopped. DIR/summary.json and DIR/tables.md follow
(``arc_vllm.reports.summary``).

Run:  arc-vllm bench niah --methods arc,sliding_window,full_context --seeds 42,82,122 \\
          --tasks 20 --out runs/niah
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from arc_vllm.agent.loop import run_episode
from arc_vllm.agent.niah import make_task
from arc_vllm.agent.scripted import ScriptedAgent
from arc_vllm.policies import POLICIES
from arc_vllm.reports.summary import report


def done_attempts(path: Path) -> set[tuple]:
    if not path.exists():
        return set()
    done = set()
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            done.add((row["method"], row["seed"], row["task"]))
    return done


def run(out: str, methods: list[str], seeds: list[int], tasks: int, config, counter,
        force: tuple[int, ...] = (5, 10, 15), noise_lines: int = 25) -> dict:
    unknown = [method for method in methods if method not in POLICIES]
    if unknown:
        raise ValueError(f"unknown method(s) {', '.join(unknown)}; available: {', '.join(POLICIES)}")
    from tqdm import tqdm

    directory = Path(out)
    directory.mkdir(parents=True, exist_ok=True)
    results = directory / "results.jsonl"
    done = done_attempts(results)
    plan = [(method, seed, index) for method in methods for seed in seeds for index in range(tasks)
            if (method, seed, index) not in done]
    budget = config.input_budget_tokens
    with open(results, "a", encoding="utf-8") as handle:
        for method, seed, index in tqdm(plan, desc="niah", unit="attempt", file=sys.stderr):
            task = make_task(seed, index, noise_lines=noise_lines)
            extra = {"config": config} if method == "arc" else {}
            policy = POLICIES[method](counter, budget, task=task.prompt, **extra)
            started = time.perf_counter()
            result = run_episode(policy, task, ScriptedAgent(), counter, budget, force=force)
            row = {**result, "method": method, "seed": seed, "task": index,
                   "wall_ms": round((time.perf_counter() - started) * 1000, 1),
                   "context_window": config.context_window, "max_tokens": config.max_tokens,
                   "force": list(force), "noise_lines": noise_lines}
            handle.write(json.dumps(row) + "\n")
            handle.flush()
    return report(directory)
