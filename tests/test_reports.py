"""Reports: McNemar against hand computations, and `arc-vllm bench niah` / `report` end to end."""

import json
import math
import subprocess
import sys

import pytest

from arc_vllm.reports.stats import binomial_two_sided_p, chi_square_p, mcnemar, mean_sd


def test_mcnemar_by_hand():
    a = [True, True, True, True, False, True, False, False]
    b = [True, False, False, False, True, True, False, False]
    result = mcnemar(a, b)
    assert (result["a_only"], result["b_only"], result["both"], result["neither"]) == (3, 1, 2, 2)
    assert result["chi2"] == pytest.approx((abs(3 - 1) - 1) ** 2 / 4)
    # exact: P(X <= 1) for X ~ Bin(4, 1/2), doubled: 2 * (1 + 4) / 16
    assert result["exact_p"] == pytest.approx(10 / 16)
    assert result["odds_ratio"] == 3
    assert mcnemar([True], [False])["odds_ratio"] == math.inf
    with pytest.raises(ValueError, match="paired"):
        mcnemar([True], [True, False])


def test_distribution_tails():
    assert chi_square_p(3.841458820694124) == pytest.approx(0.05, abs=1e-6)
    assert binomial_two_sided_p(0, 5) == pytest.approx(2 / 32)
    assert binomial_two_sided_p(3, 6) == 1.0
    assert mean_sd([0.5, 1.0]) == (0.75, pytest.approx(math.sqrt(0.125)))


def cli(*args):
    return subprocess.run([sys.executable, "-m", "arc_vllm.cli", *map(str, args)],
                          capture_output=True, text=True, timeout=600)


def test_bench_niah_writes_results_skips_done_attempts_and_reports(tmp_path):
    out = tmp_path / "niah"
    done = cli("bench", "niah", "--tasks", 2, "--seeds", "42,82", "--out", out)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 3 * 2 * 2
    again = cli("bench", "niah", "--tasks", 2, "--seeds", "42,82", "--out", out)
    assert again.returncode == 0
    assert len((out / "results.jsonl").read_text().splitlines()) == 12  # nothing redone
    summary = json.loads((out / "summary.json").read_text())
    for method in ("arc", "sliding_window", "full_context"):
        assert {"attempts", "passes", "accuracy", "no_answer"} <= set(summary["methods"][method])
    assert summary["methods"]["arc"]["accuracy"] == 1.0
    assert summary["mcnemar_vs_arc"]["full_context"]["paired_attempts"] == 4
    assert "| arc | 4 / 4 |" in (out / "tables.md").read_text()
    reported = cli("report", out)
    assert reported.returncode == 0 and "| arc vs |" in reported.stdout
    bad = cli("bench", "niah", "--methods", "arc,oracle", "--out", tmp_path / "x")
    assert bad.returncode != 0 and "unknown method(s) oracle" in bad.stderr
