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


def row(method, seed, task, passed, trace=(), setting="s"):
    return {"method": method, "seed": seed, "task": task, "passed": passed, "answered": passed,
            "setting": setting, "trace": [list(entry) for entry in trace]}


def test_per_seed_odds_and_discordant_seeds_by_hand():
    from arc_vllm.reports.summary import summarize

    rows = []
    # seed 1: arc-only 4, other-only 2 -> odds 2; seed 2: arc-only 3, other-only 1 -> odds 3;
    # seed 3: arc-only 2, other-only 0 -> no finite odds, not a discordant seed.
    for seed, (a_only, b_only) in ((1, (4, 2)), (2, (3, 1)), (3, (2, 0))):
        outcomes = [(True, False)] * a_only + [(False, True)] * b_only + [(True, True)]
        for task, (ours, theirs) in enumerate(outcomes):
            rows += [row("arc", seed, task, ours), row("window", seed, task, theirs)]
    test = summarize(rows)["mcnemar_vs_arc"]["window"]
    assert (test["a_only"], test["b_only"], test["both"]) == (9, 3, 3)
    assert test["odds_ratio"] == 3 and test["discordant_seeds"] == 2
    assert test["per_seed_odds_mean"] == pytest.approx(2.5)
    assert test["per_seed_odds_sd"] == pytest.approx(math.sqrt(0.5))


def test_cost_report_recomputes_a_cell_by_hand(tmp_path):
    from arc_vllm.cost.roofline import Call, Hardware, Model, roofline

    rows = [row("arc", 42, 0, True, [("agent", 1000, 10, None, 1.0), ("agent", 2000, 10, 512, 1.0)]),
            row("arc", 42, 1, False, [("agent", 3000, 20, None, 1.0)]),
            row("sliding_window", 42, 0, True, [("agent", 3000, 10, None, 1.0), ("llm_summary", 3000, 100, 0, 9.0)]),
            row("sliding_window", 42, 1, False, [("agent", 3000, 10, None, 1.0)])]
    (tmp_path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    done = cli("cost", tmp_path, "--hardware", "H200", "--model", "Qwen3-8B")
    assert done.returncode == 0, done.stderr[-2000:]
    cost = json.loads((tmp_path / "cost.json").read_text())["settings"]["s"]["H200"]
    model, hardware = Model.named("Qwen3-8B"), Hardware.named("H200")
    ours = roofline([Call(1000, 10), Call(2000, 10), Call(3000, 20)], 1, model, hardware)
    theirs = roofline([Call(3000, 10), Call(3000, 100), Call(3000, 10)], 1, model, hardware)
    assert cost["arc"]["decode_tb_per_success"] == pytest.approx(ours["decode_tb_per_success"])
    assert cost["arc"]["savings_pct"] == pytest.approx(
        100 * (1 - ours["decode_tb_per_success"] / theirs["decode_tb_per_success"]))
    assert cost["arc"]["speedup"] == pytest.approx(theirs["total_s_per_success"] / ours["total_s_per_success"])
    assert "| arc | 1 |" in done.stdout and (tmp_path / "hbm_H200.png").read_bytes()[:4] == b"\x89PNG"
    bad = cli("cost", tmp_path, "--hardware", "TPU")
    assert bad.returncode != 0 and "unknown hardware 'TPU'" in bad.stderr


def test_no_success_means_no_cost_per_success(tmp_path):
    rows = [row("arc", 42, 0, True, [("agent", 100, 5, None, 1.0)]),
            row("sliding_window", 42, 0, False, [("agent", 100, 5, None, 1.0)])]
    (tmp_path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert cli("cost", tmp_path, "--hardware", "MI300X").returncode == 0
    cost = json.loads((tmp_path / "cost.json").read_text())["settings"]["s"]["MI300X"]
    assert cost["sliding_window"]["decode_tb_per_success"] is None and cost["arc"]["savings_pct"] is None


def test_sweeps_run_every_setting_into_one_results_file(tmp_path):
    out = tmp_path / "sweep"
    done = cli("bench", "niah", "--methods", "arc,sliding_window", "--tasks", 1, "--seeds", "42",
               "--force", "5", "3,6,9,12,15", "--noise-lines", "5", "30", "--recall-budget", "4k/2k",
               "--out", out)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 2 * 2 * 2 and all(r["recall_budget_chars"] == 4000 for r in rows)
    summary = json.loads((out / "summary.json").read_text())
    assert len(summary["settings"]) == 4
    assert all(part["methods"]["arc"]["passes"] == 1 for part in summary["settings"].values())
    assert "| force=3,6,9,12,15 noise=30 recall=4k/2k | arc | 1 / 1 |" in (out / "tables.md").read_text()
    assert (out / "accuracy.png").read_bytes()[:4] == b"\x89PNG"


def test_bench_options_are_checked_before_anything_runs(tmp_path):
    bad = cli("bench", "niah", "--recall-budget", "16k", "--out", tmp_path / "a")
    assert bad.returncode != 0 and "expected BUDGET/MAX such as 16k/8k" in bad.stderr
    bad = cli("bench", "niah", "--methods", "llm_summary", "--out", tmp_path / "b")
    assert bad.returncode != 0 and "--backend vllm" in bad.stderr
    bad = cli("bench", "longbench", "--data", tmp_path / "none.json", "--out", tmp_path / "c")
    assert bad.returncode != 0 and "needs a model" in bad.stderr
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
