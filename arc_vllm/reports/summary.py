"""From results.jsonl to summary.json and markdown tables in the paper's layouts.

results.jsonl holds one attempt per line: method, seed, task, passed, answered, crashed,
calls, prompt_tokens, ... ``summarize`` gives per method: attempts, passes, accuracy,
no_answer (attempts without an accepted submission), mean no-answer / pass / accuracy per
seed with their SD; and McNemar tests of ARC against each other method on the attempts
they share (seed, task).

Run ``arc-vllm report DIR`` (reads DIR/results.jsonl, writes DIR/summary.json and
DIR/tables.md).
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

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


def summarize(rows: list[dict], reference: str = "arc") -> dict:
    by_method: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        by_method[row["method"]].append(row)
    methods = {}
    for method, attempts in by_method.items():
        seeds = sorted({row["seed"] for row in attempts})
        per_seed = {seed: [row for row in attempts if row["seed"] == seed] for seed in seeds}
        accuracy = [sum(r["passed"] for r in rs) / len(rs) for rs in per_seed.values()]
        no_answer = [sum(not r["answered"] for r in rs) for rs in per_seed.values()]
        passes = [sum(r["passed"] for r in rs) for rs in per_seed.values()]
        methods[method] = {
            "attempts": len(attempts), "passes": sum(r["passed"] for r in attempts),
            "accuracy": sum(r["passed"] for r in attempts) / len(attempts),
            "no_answer": sum(not r["answered"] for r in attempts), "seeds": seeds,
            "mean_no_answer": mean_sd(no_answer)[0], "mean_pass": mean_sd(passes)[0],
            "mean_accuracy": mean_sd(accuracy)[0], "sd_accuracy": mean_sd(accuracy)[1],
            "prompt_tokens": sum(r.get("prompt_tokens", 0) for r in attempts),
            "calls": sum(r.get("calls", 0) for r in attempts)}
    tests = {}
    if reference in by_method:
        ours = {(r["seed"], r["task"]): r["passed"] for r in by_method[reference]}
        for method, attempts in by_method.items():
            if method == reference:
                continue
            theirs = {(r["seed"], r["task"]): r["passed"] for r in attempts}
            shared = sorted(set(ours) & set(theirs))
            tests[method] = dict(mcnemar([ours[k] for k in shared], [theirs[k] for k in shared]),
                                 paired_attempts=len(shared))
    return {"methods": methods, "mcnemar_vs_" + reference: tests}


def tables(summary: dict, reference: str = "arc") -> str:
    lines = ["| Method | Pass/Attempts | mean no-ans | mean pass | mean acc | SD | acc (mean +- SD) |",
             "|---|---|---|---|---|---|---|"]
    for method, m in summary["methods"].items():
        lines.append(f"| {method} | {m['passes']} / {m['attempts']} | {m['mean_no_answer']:.2f} | "
                     f"{m['mean_pass']:.2f} | {100 * m['mean_accuracy']:.2f}% | "
                     f"{100 * m['sd_accuracy']:.2f}% | {100 * m['mean_accuracy']:.2f}% +- "
                     f"{100 * m['sd_accuracy']:.2f}% |")
    lines += ["", f"| {reference} vs | {reference}-only | other-only | both | neither | chi2 p | exact p | odds ratio |",
              "|---|---|---|---|---|---|---|---|"]
    for method, t in summary.get("mcnemar_vs_" + reference, {}).items():
        lines.append(f"| {method} | {t['a_only']} | {t['b_only']} | {t['both']} | {t['neither']} | "
                     f"{t['chi2_p']:.3g} | {t['exact_p']:.3g} | {t['odds_ratio']:.3g} |")
    return "\n".join(lines) + "\n"


def finite(value):
    """JSON has no infinity: an infinite odds ratio is written as the string "inf"."""
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
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
    return summary
