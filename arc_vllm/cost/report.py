"""``arc-vllm cost DIR``: the roofline tables (the paper's Tables 3, 4, 9-13) from a run's
trajectories.

Every attempt's per-call trace (agent calls and the policies' own model calls: summaries,
states) becomes roofline calls (prompt tokens p_k, generated tokens m_k); per setting, per
hardware, per method: successes, total / decode / prefill time per success, decode HBM
traffic per success, savings and speedup against the baseline method. The token counts are
the run's own (the embedded model's tokenizer, the run's window); the hardware and model are
what the figures are projected onto (Qwen3-8B on H200 and MI300X by default).

Writes DIR/cost.json, DIR/cost.md and DIR/hbm_<hardware>.png; run
``arc-vllm cost DIR --hardware H200,MI300X --model Qwen3-8B --baseline sliding_window``.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path

from arc_vllm.cost.roofline import Call, Hardware, Model, compare, roofline
from arc_vllm.reports.plots import plot_hbm
from arc_vllm.reports.summary import finite, load_results


def calls_of(attempts: list[dict], agent_generated_tokens: int | None = None) -> list[Call]:
    """Roofline calls of every trace entry; ``agent_generated_tokens`` replaces m_k of the
    agent's calls (the scripted agent writes only its action, a model also its reasoning)."""
    return [Call(int(entry[1]), int(agent_generated_tokens if agent_generated_tokens is not None
                                    and entry[0] == "agent" else entry[2] or 0))
            for row in attempts for entry in row.get("trace", [])]


def cost_tables(rows: list[dict], hardware: list[str], model: str, baseline: str,
                scratch_gb: float = 0.0, agent_generated_tokens: int | None = None) -> dict:
    spec = Model.named(model)
    machines = [Hardware.named(name) for name in hardware]
    by_setting: dict[str, dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        by_setting[row.get("setting", "")][row["method"]].append(row)
    out = {"model": model, "baseline": baseline, "scratch_gb": scratch_gb,
           "agent_generated_tokens": agent_generated_tokens, "settings": {}}
    for label, methods in by_setting.items():
        per_hardware = {}
        for machine in machines:
            figures = {method: roofline(calls_of(attempts, agent_generated_tokens),
                                        sum(r["passed"] for r in attempts), spec, machine, scratch_gb * 1e9)
                       for method, attempts in methods.items()}
            per_hardware[machine.name] = compare(figures, baseline) if baseline in figures else figures
        out["settings"][label] = per_hardware
    return out


def _cell(value: float | None, digits: int = 4, unit: str = "") -> str:
    return "–" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{digits}g}{unit}"


def markdown(tables: dict) -> str:
    generated = tables.get("agent_generated_tokens")
    lines = [f"Roofline per successful task, model {tables['model']}; savings and speedup against "
             f"{tables['baseline']} (– where a side has no success)"
             + (f"; agent calls taken to generate {generated} tokens each" if generated is not None else "")
             + ".", ""]
    for label, per_hardware in tables["settings"].items():
        for hardware, methods in per_hardware.items():
            lines += [f"**{hardware}**{' · ' + label if label else ''}", "",
                      "| Method | n_succ | t_tot (s) | t_dec (s) | t_pre (s) | BW (TB) | Savings (%) | Speedup | B |",
                      "|---|---|---|---|---|---|---|---|---|"]
            for method, f in methods.items():
                per = f["successes"] or math.nan
                lines.append(f"| {method} | {f['successes']} | {_cell(f['total_s_per_success'])} | "
                             f"{_cell(f['decode_s'] / per)} | {_cell(f['prefill_s'] / per)} | "
                             f"{_cell(f['decode_tb_per_success'])} | {_cell(f.get('savings_pct'), 3)} | "
                             f"{_cell(f.get('speedup'), 3, 'x')} | "
                             f"{f['batch_size']} |")
            lines.append("")
    return "\n".join(lines)


def cost_report(directory: str | Path, hardware: list[str] = ("H200", "MI300X"), model: str = "Qwen3-8B",
                baseline: str = "sliding_window", scratch_gb: float = 0.0,
                agent_generated_tokens: int | None = None) -> dict:
    directory = Path(directory)
    tables = cost_tables(load_results(directory / "results.jsonl"), list(hardware), model, baseline,
                         scratch_gb, agent_generated_tokens)
    (directory / "cost.json").write_text(json.dumps(finite(tables), indent=1, allow_nan=False))
    (directory / "cost.md").write_text(markdown(tables))
    for name in hardware:
        groups = {label: {m: f["decode_tb_per_success"] for m, f in per_hw[name].items() if f["successes"]}
                  for label, per_hw in tables["settings"].items()}
        plot_hbm(groups, directory / f"hbm_{name}.png")
    return tables
