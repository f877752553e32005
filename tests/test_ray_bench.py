"""``arc-vllm bench niah --ray``: the episodes as Ray tasks on a local cluster (a real Ray, in a
loopback-only network namespace) give the same results file as a local run, survive a killed
worker without losing or repeating an attempt, and resume.

    pytest tests/test_ray_bench.py
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers.processes import processes_titled

pytestmark = [pytest.mark.slow, pytest.mark.memory(5)]  # Ray and its workers
ARC = str(Path(sys.executable).parent / "arc-vllm")
BENCH = ["bench", "niah", "--methods", "arc,sliding_window", "--seeds", "42,82", "--tasks", "6"]


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def content(path: Path) -> list[dict]:
    """Each attempt without its timings (wall clock and per-call milliseconds), in plan order."""
    out = []
    for row in rows(path):
        row = {key: value for key, value in row.items() if key not in ("wall_ms", "model_ms")}
        row["trace"] = [entry[:4] for entry in row["trace"]]
        out.append(row)
    return sorted(out, key=lambda row: (row["method"], row["seed"], row["task"]))


def bench_command(out: Path, *extra: str) -> list[str]:
    return [ARC, *BENCH, *extra, "--out", str(out)]


def run_bench(out: Path, *extra: str, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run(bench_command(out, *extra), capture_output=True, text=True, timeout=timeout)


def test_ray_results_equal_a_local_run_and_a_rerun_adds_nothing(tmp_path):
    # The local run beside the Ray run, whose cluster start-up leaves a core idle: 19 s against
    # 28 s one after the other.
    with open(tmp_path / "local.err", "w") as errors:
        local = subprocess.Popen(bench_command(tmp_path / "local"), stdout=subprocess.DEVNULL, stderr=errors)
        try:
            distributed = run_bench(tmp_path / "ray", "--ray")
            local.wait(timeout=600)
        finally:
            local.kill()  # only if the Ray run failed first
    assert local.returncode == 0, (tmp_path / "local.err").read_text()[-2000:]
    assert distributed.returncode == 0, distributed.stderr[-3000:]
    assert content(tmp_path / "ray" / "results.jsonl") == content(tmp_path / "local" / "results.jsonl")
    again = run_bench(tmp_path / "ray", "--ray")
    assert again.returncode == 0 and len(rows(tmp_path / "ray" / "results.jsonl")) == 2 * 2 * 6


def ray_task_workers() -> list[int]:
    """Ray worker processes running an attempt (their title is ``ray::attempt``)."""
    return processes_titled(b"ray::attempt")


def test_a_killed_worker_loses_and_repeats_no_attempt(tmp_path):
    out = tmp_path / "killed"
    # Enough attempts that workers are busy when one is killed.
    command = [ARC, "bench", "niah", "--methods", "arc,sliding_window,full_context", "--seeds",
               "42,82,122", "--tasks", "20", "--ray", "--out", str(out)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    killed, deadline = None, time.time() + 300
    while killed is None and process.poll() is None and time.time() < deadline:
        workers = ray_task_workers()
        if workers:
            os.kill(workers[0], signal.SIGKILL)
            killed = workers[0]
        time.sleep(0.05)
    stdout, stderr = process.communicate(timeout=600)
    assert killed is not None, "no Ray worker was seen running an attempt"
    assert process.returncode == 0, stderr[-3000:]
    keys = [(row["method"], row["seed"], row["task"]) for row in rows(out / "results.jsonl")]
    assert len(keys) == len(set(keys)) == 3 * 3 * 20  # every attempt once: none lost, none twice
