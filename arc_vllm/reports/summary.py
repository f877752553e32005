"""From results.jsonl to summary.json and markdown tables in the paper's layouts.

results.jsonl holds one attempt per line: method, seed, task, passed, answered, crashed,
calls, prompt_tokens, ... ``summarize`` gives per method: attempts, passes, accuracy,
no_answer (attempts without an accepted submission), mean no-answer / pass / accuracy per
seed with their SD; and McNemar tests of ARC against each other method on the attempts
they share (seed, task).

With several settings in one run (a sweep), ``settings`` holds the same per setting and the
tables add the sweep table (Tables 7, 10, 11 of the paper, accuracy side).

Run ``arc-vllm report DIR`` (reads DIR/results.jsonl, writes DIR/summary.json,
DIR/tables.md and DIR/accuracy.png).
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path

from arc_vllm.reports.plots import plot_accuracy
from arc_vllm.reports.stats import mcnemar, mean_sd


def load_results(path: Path) -> list[dict]:
    rows = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as error:
                    raise ValueError(f"{path}:{number}: not JSON ({error})") from None
    return rows


def method_figures(attempts: list[dict]) -> dict:
    seeds = sorted({row["seed"] for row in attempts})
    per_seed = {seed: [row for row in attempts if row["seed"] == seed] for seed in seeds}
    accuracy = [sum(r["passed"] for r in rs) / len(rs) for rs in per_seed.values()]
    no_answer = [sum(not r["answered"] for r in rs) for rs in per_seed.values()]
    passes = [sum(r["passed"] for r in rs) for rs in per_seed.values()]
    return {"attempts": len(attempts), "passes": sum(r["passed"] for r in attempts),
            "accuracy": sum(r["passed"] for r in attempts) / len(attempts),
            "no_answer": sum(not r["answered"] for r in attempts),
            "crashed": sum(bool(r.get("crashed")) for r in attempts), "seeds": seeds,
            "mean_no_answer": mean_sd(no_answer)[0], "mean_pass": mean_sd(passes)[0],
            "mean_accuracy": mean_sd(accuracy)[0], "sd_accuracy": mean_sd(accuracy)[1],
            "calls": sum(r.get("calls", 0) for r in attempts),
            "model_calls": sum(r.get("model_calls", 0) for r in attempts),
            "prompt_tokens": sum(r.get("prompt_tokens", 0) for r in attempts),
            "generated_tokens": sum(r.get("generated_tokens", 0) or 0 for r in attempts),
            "wall_s": round(sum(r.get("wall_ms", 0) for r in attempts) / 1000, 1)}


def paired(attempts: list[dict]) -> dict[tuple, bool]:
    return {(r.get("setting", ""), r["seed"], r["task"]): r["passed"] for r in attempts}


def mcnemar_table(by_method: dict[str, list[dict]], reference: str) -> dict:
    """McNemar of ``reference`` against every other method on the attempts they share, with
    the per-seed odds ratios (mean +- SD over the seeds where the other method won at least
    once, so that the ratio is finite: ``discordant_seeds``)."""
    tests = {}
    if reference not in by_method:
        return tests
    ours = paired(by_method[reference])
    for method, attempts in by_method.items():
        if method == reference:
            continue
        theirs = paired(attempts)
        shared = sorted(set(ours) & set(theirs))
        test = mcnemar([ours[k] for k in shared], [theirs[k] for k in shared])
        odds = []
        for seed in sorted({key[1] for key in shared}):
            keys = [key for key in shared if key[1] == seed]
            seed_test = mcnemar([ours[k] for k in keys], [theirs[k] for k in keys])
            if seed_test["b_only"]:
                odds.append(seed_test["odds_ratio"])
        mean, sd = mean_sd(odds)
        tests[method] = dict(test, paired_attempts=len(shared), per_seed_odds_mean=mean if odds else None,
                             per_seed_odds_sd=sd if odds else None, discordant_seeds=len(odds))
    return tests


def summarize(rows: list[dict], reference: str = "arc") -> dict:
    """Per method over every row; per setting too when the run is a sweep."""
    by_method: dict[str, list[dict]] = defaultdict(list)
    by_setting: dict[str, dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        by_method[row["method"]].append(row)
        by_setting[row.get("setting", "")][row["method"]].append(row)
    summary = {"methods": {method: method_figures(attempts) for method, attempts in by_method.items()},
               "mcnemar_vs_" + reference: mcnemar_table(by_method, reference)}
    if len(by_setting) > 1:
        summary["settings"] = {label: {"methods": {m: method_figures(a) for m, a in methods.items()},
                                       "mcnemar_vs_" + reference: mcnemar_table(methods, reference)}
                               for label, methods in by_setting.items()}
    return summary


def _odds(value) -> str:
    return "inf" if value == math.inf else "–" if value is None or value != value else f"{value:.3g}"


def accuracy_table(methods: dict) -> list[str]:
    lines = ["| Method | Pass/Attempts | mean no-ans | mean pass | mean acc | SD | acc (mean +- SD) |",
             "|---|---|---|---|---|---|---|"]
    for method, m in methods.items():
        lines.append(f"| {method} | {m['passes']} / {m['attempts']} | {m['mean_no_answer']:.2f} | "
                     f"{m['mean_pass']:.2f} | {100 * m['mean_accuracy']:.2f}% | "
                     f"{100 * m['sd_accuracy']:.2f}% | {100 * m['mean_accuracy']:.2f}% +- "
                     f"{100 * m['sd_accuracy']:.2f}% |")
    return lines


def mcnemar_lines(tests: dict, reference: str) -> list[str]:
    lines = [f"| {reference} vs | {reference}-only | other-only | both | neither | chi2 p | exact p | "
             "odds ratio | per-seed odds +- SD | discordant seeds |", "|---|---|---|---|---|---|---|---|---|---|"]
    for method, t in tests.items():
        per_seed = "–" if t["per_seed_odds_mean"] is None else \
            f"{t['per_seed_odds_mean']:.3g} +- {t['per_seed_odds_sd']:.3g}"
        lines.append(f"| {method} | {t['a_only']} | {t['b_only']} | {t['both']} | {t['neither']} | "
                     f"{t['chi2_p']:.3g} | {t['exact_p']:.3g} | {_odds(t['odds_ratio'])} | {per_seed} | "
                     f"{t['discordant_seeds']} |")
    return lines


def tables(summary: dict, reference: str = "arc") -> str:
    key = "mcnemar_vs_" + reference
    lines = accuracy_table(summary["methods"]) + [""] + mcnemar_lines(summary.get(key, {}), reference)
    if "settings" in summary:
        lines += ["", "Sweep (accuracy = Success / (Success + Fail) per setting):", "",
                  "| Setting | Method | Pass/Attempts | acc | no-ans |", "|---|---|---|---|---|"]
        for label, part in summary["settings"].items():
            for method, m in part["methods"].items():
                lines.append(f"| {label} | {method} | {m['passes']} / {m['attempts']} | "
                             f"{100 * m['accuracy']:.2f}% | {m['no_answer']} |")
        for label, part in summary["settings"].items():
            lines += ["", f"Setting {label}:", ""] + mcnemar_lines(part.get(key, {}), reference)
    return "\n".join(lines) + "\n"


def finite(value):
    """JSON has no infinity or NaN: an infinite odds ratio is written as the string "inf", an
    undefined figure (NaN: a cost per success without a success) as null."""
    if isinstance(value, float) and value != value:
        return None
    if isinstance(value, float) and value in (float("inf"), float("-inf")):
        return str(value)
    if isinstance(value, dict):
        return {key: finite(item) for key, item in value.items()}
    if isinstance(value, list):
        return [finite(item) for item in value]
    return value


def report(directory: str | Path) -> dict:
    directory = Path(directory)
    summary = summarize(load_results(directory / "results.jsonl"))
    (directory / "summary.json").write_text(json.dumps(finite(summary), indent=1, allow_nan=False))
    (directory / "tables.md").write_text(tables(summary))
    plot_accuracy(summary, directory / "accuracy.png")
    return summary
