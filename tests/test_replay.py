"""`arc-vllm replay`: the README's main job, end to end on the shipped sample."""

import json
import subprocess
import sys
from pathlib import Path

from arc_vllm.agent.replay import reusable_prefix_tokens
from arc_vllm.agent.trajectory import load

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "examples" / "trajectories.jsonl"
REQUIRED = ["trajectories", "steps", "observations", "exactly_recoverable", "budget_tokens",
            "max_prompt_tokens", "over_budget_calls", "prompt_tokens_total",
            "full_context_prompt_tokens_total", "prefix_reusable_tokens_total",
            "compaction_ms_p50", "compaction_ms_p99"]


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "arc_vllm.cli", "replay", *map(str, args)],
                          capture_output=True, text=True, timeout=600)


def test_sample_replays_within_budget_and_recovers_everything(tmp_path):
    done = run_cli(SAMPLE, "--context-window", 4096, "--max-tokens", 512, "--out", tmp_path)
    assert done.returncode == 0, done.stderr
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert all(key in summary for key in REQUIRED)
    assert summary["trajectories"] == 3 and summary["over_budget_calls"] == 0
    assert summary["max_prompt_tokens"] <= summary["budget_tokens"] == 4096 - 512
    assert summary["exactly_recoverable"] == summary["observations"] > 100
    assert summary["full_context_over_budget_calls"] > 0  # the sample does overflow without ARC
    assert summary["prefix_reusable_tokens_total"] % 128 == 0
    assert 0 < summary["prefix_reusable_tokens_total"] < summary["prompt_tokens_total"]
    per = json.loads((tmp_path / "trajectories" / "needle-hunt.json").read_text())
    assert per["compactions"] > 0 and len(per["calls"]) == per["steps"]


def test_sample_file_is_the_generator_output():
    made = subprocess.run([sys.executable, str(ROOT / "examples" / "make_trajectories.py")],
                          capture_output=True, text=True, check=True)
    assert made.stdout == SAMPLE.read_text(encoding="utf-8")


def test_malformed_lines_are_reported_with_line_numbers_and_skipped(tmp_path):
    good = SAMPLE.read_text(encoding="utf-8").splitlines()[0]
    lines = [good, "{not json", json.dumps({"id": "x", "task": "t"}),
             json.dumps({"id": "y", "task": "t", "steps": [{"action": 3, "observation": ""}]}),
             "", json.dumps({"id": "z", "task": "t", "steps": [{"action": "ls", "observation": "a"}]})]
    path = tmp_path / "mixed.jsonl"
    path.write_bytes(("\n".join(lines) + "\n").encode() + b"\xff\xfe broken utf8\n")
    loaded = load(path)
    assert [t.id for t in loaded.trajectories] == ["build-debugging", "z"]
    assert [error.split(":")[1] for error in loaded.errors] == ["2", "3", "4", "7"]
    assert "missing field(s): steps" in loaded.errors[1] and "action must be a string" in loaded.errors[2]
    done = run_cli(path, "--out", tmp_path / "out")
    assert done.returncode == 0 and "mixed.jsonl:2: skipped" in done.stderr
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["trajectories"] == 2


def test_bad_options_fail_clearly(tmp_path):
    done = run_cli(SAMPLE, "--context-window", 600, "--out", tmp_path)
    assert done.returncode == 2 and "too small" in done.stderr
    done = run_cli(tmp_path / "missing.jsonl", "--out", tmp_path)
    assert done.returncode == 2 and "no such file" in done.stderr


def test_reusable_prefix_counts_whole_blocks():
    assert reusable_prefix_tokens(None, [1] * 500) == 0
    assert reusable_prefix_tokens(list(range(300)), list(range(300))) == 256
    assert reusable_prefix_tokens(list(range(300)), list(range(200)) + [0] * 100) == 128
    assert reusable_prefix_tokens([1, 2], [3]) == 0
