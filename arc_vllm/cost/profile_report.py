"""profile.md (and the console summary) from ``cost.profile``'s result: calibration, the
measured-vs-predicted decode table, the fits, prefill, KV bytes, traffic and the trace replay."""

from __future__ import annotations

import math


def _g(value, scale: float = 1.0, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return f"{value * scale:.{digits}g}"


def markdown(result: dict) -> str:
    calibration, hardware, model = result["calibration"], result["hardware"], result["model"]
    lines = [f"# Profile: {model['name']} on {calibration['device']} ({result['engine']} engine)", "",
             "## Calibration (measured in this run)", "",
             f"- copy bandwidth: {_g(calibration['copy_bytes_per_s'], 1e-9)} GB/s",
             f"- matmul ({calibration['dtype']}): {_g(calibration['flops_per_s'], 1e-9)} GFLOP/s",
             f"- memory: {_g(calibration['memory_bytes'], 2 ** -30)} GiB",
             f"- one token through a bf16 linear layer reads weights at "
             f"{_g(calibration.get('linear_bytes_per_s'), 1e-9)} GB/s (what decode kernels attain)",
             f"- roofline machine: {_g(hardware['bandwidth_bytes_s'], 1e-9)} GB/s, "
             f"{_g(hardware['flops'], 1e-9)} GFLOP/s, from {hardware['source']}", "",
             "## Decode step: measured against the roofline", "",
             "| context | batch | measured ms | predicted ms | ratio | bound | memory ms | compute ms |",
             "|---:|---:|---:|---:|---:|---|---:|---:|"]
    for cell in result["decode"]:
        lines.append(f"| {cell['context_tokens']:.0f} | {cell['batch']} | {_g(cell['measured_s'], 1e3)} | "
                     f"{_g(cell['predicted_s'], 1e3)} | {cell['ratio']:.2f} | {cell['bound']} | "
                     f"{_g(cell['memory_s'], 1e3)} | {_g(cell['compute_s'], 1e3)} |")
    targets = result["targets"]
    effective = [cell["effective_bytes_per_s"] for cell in result["decode"]]
    lines += ["", f"Cells with measured/predicted in [0.67, 1.5]: {targets['cells_within']} of "
              f"{targets['cells']}. The model's bytes in the measured times mean an effective "
              f"bandwidth of {_g(min(effective), 1e-9)}-{_g(max(effective), 1e-9)} GB/s.", "", "## Fits", "",
              "Against context L, per batch (t = intercept + slope L):", "",
              "| batch | R^2 | slope us/token | model slope | intercept ms | model intercept |",
              "|---:|---:|---:|---:|---:|---:|"]
    for batch, fit in result["fit"]["against_context"].items():
        lines.append(f"| {batch} | {_g(fit['r2'])} | {_g(fit['slope'], 1e6)} | {_g(fit['model_slope'], 1e6)} | "
                     f"{_g(fit['intercept'], 1e3)} | {_g(fit['model_intercept'], 1e3)} |")
    lines += ["", "Against 1/batch, per context (time per token = intercept + slope / batch):", "",
              "| context | R^2 | slope ms | model slope | intercept ms | model intercept |",
              "|---:|---:|---:|---:|---:|---:|"]
    for context, fit in result["fit"]["against_inverse_batch"].items():
        lines.append(f"| {context} | {_g(fit['r2'])} | {_g(fit['slope'], 1e3)} | {_g(fit['model_slope'], 1e3)} | "
                     f"{_g(fit['intercept'], 1e3)} | {_g(fit['model_intercept'], 1e3)} |")
    lines += calibrated_lines(result)
    if result["prefill"]:
        lines += ["", "## Prefill", "", "| prompt tokens | measured ms | predicted ms | ratio |",
                  "|---:|---:|---:|---:|"]
        for row in result["prefill"]:
            lines.append(f"| {row['prompt_tokens']} | {_g(row['measured_s'], 1e3)} | "
                         f"{_g(row['predicted_s'], 1e3)} | {row['measured_s'] / row['predicted_s']:.2f} |")
    kv = result["kv_bytes"]
    lines += ["", "## Memory", "",
              f"- KV bytes per token: measured {_g(kv['measured_bytes_per_token'])}, "
              f"model kv_b {kv['model_bytes_per_token']}",
              f"- peak memory: {_g(result['peak_memory_bytes'], 2 ** -30)} GiB",
              f"- DRAM traffic: {traffic_line(result)}"]
    if "trace" in result:
        trace = result["trace"]
        lines += ["", f"## Recorded calls replayed ({trace['file']})", "",
                  f"Batch 1, prefix caching off; ratios against {trace['baseline']}.", "",
                  "| method | successes | calls | sampled | measured s/success | modelled s/success | "
                  "measured ratio | modelled ratio | measured ratio per attempt | modelled ratio per attempt |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for method, row in trace["methods"].items():
            lines.append(f"| {method} | {row['successes']} | {row['calls']} | {row['sampled_calls']} | "
                         f"{_g(row['measured_s_per_success'])} | {_g(row['modelled_s_per_success'])} | "
                         f"{_g(row.get('measured_ratio_to_baseline'))} | {_g(row.get('modelled_ratio_to_baseline'))} | "
                         f"{_g(row.get('measured_attempt_ratio_to_baseline'))} | "
                         f"{_g(row.get('modelled_attempt_ratio_to_baseline'))} |")
        if any("calibrated_ratio_to_baseline" in row for row in trace["methods"].values()):
            lines += ["", "With the calibrated step model for decode (its per-step cost included):", "",
                      "| method | calibrated s/success | calibrated ratio | calibrated ratio per attempt |",
                      "|---|---:|---:|---:|"]
            for method, row in trace["methods"].items():
                lines.append(f"| {method} | {_g(row.get('calibrated_s_per_success'))} | "
                             f"{_g(row.get('calibrated_ratio_to_baseline'))} | "
                             f"{_g(row.get('calibrated_attempt_ratio_to_baseline'))} |")
    return "\n".join(lines) + "\n"


def calibrated_lines(result: dict) -> list[str]:
    """The calibrated model: its fit, the held-out cells, how the run was measured, and the
    run it was compared with."""
    fit, measurement = result.get("calibrated"), result.get("measurement")
    if not fit:
        return []
    low, high = fit["range"]
    lines = ["", "## Calibrated model (the roofline's terms plus a per-step cost)", "",
             f"t = t_step + k_mem memory_s + k_flop compute_s, fitted on {len(fit['fitted_cells'])} cells "
             f"(a checkerboard over context and batch): t_step {_g(fit['t_step_s'], 1e3)} ms, "
             f"k_mem {_g(fit['k_mem'])}, k_flop {_g(fit['k_flop'])}. On the other "
             f"{len(fit['held_out'])} cells, measured / predicted:", "",
             "| context | batch | measured ms | predicted ms | ratio |", "|---:|---:|---:|---:|---:|"]
    for row in fit["held_out"]:
        lines.append(f"| {row['context']:.0f} | {row['batch']} | {_g(row['measured_s'], 1e3)} | "
                     f"{_g(row['predicted_s'], 1e3)} | {row['ratio']:.2f} |")
    every = fit["all_cells"]
    lines += ["", f"Worst held-out ratio {fit['worst_ratio']:.2f}; every held-out cell in [{low}, {high}]: "
              f"{'yes' if fit['held_out_within'] else 'no'}. Fitted on every cell: t_step "
              f"{_g(every['t_step_s'], 1e3)} ms, k_mem {_g(every['k_mem'])}, k_flop {_g(every['k_flop'])}."]
    if measurement:
        lines += ["", f"Measured: {measurement['repeats']} visits per cell, {measurement['steps']} decode "
                  f"steps each, {measurement['order']}; the widest spread of a cell's visits "
                  f"{measurement['worst_spread']:.0%} of its median; load average "
                  f"{measurement['load_average_before'][0]:.2f} before, {measurement['load_average_after'][0]:.2f} "
                  f"after, on {measurement['cpus']} CPUs."]
    previous = result.get("against_previous")
    if previous:
        agree = "within 10%" if previous["within_10_percent"] else f"{previous['relative_difference']:.0%} apart"
        lines += ["", f"Against {previous['file']}: t_step {_g(previous['t_step_s'], 1e3)} ms now, "
                  f"{_g(previous['previous_t_step_s'], 1e3)} ms then ({agree}); k_mem "
                  f"{_g(previous['k_mem'])} against {_g(previous['previous_k_mem'])}; load average "
                  f"{previous['load_average'][0]:.2f} now"
                  + (f", {previous['previous_load_average'][0]:.2f} then" if previous.get("previous_load_average") else "")
                  + "."]
    return lines


def traffic_line(result: dict) -> str:
    traffic = result["traffic"]
    if not traffic.get("measured"):
        implied = [cell["implied_bytes"] / cell["model_bytes"] for cell in result["decode"]]
        return (f"{traffic['reason']}; implied by time x measured bandwidth: "
                f"{_g(min(implied))}-{_g(max(implied))} x the model's bytes (implied, not counted)")
    return "; ".join(f"context {row['context_tokens']:.0f} batch {row['batch']}: "
                     f"{_g(row['dram_bytes'] / row['model_bytes'])} x the model's bytes"
                     for row in traffic["cells"]) + f" ({traffic['tool']})"
