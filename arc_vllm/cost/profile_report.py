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
    return "\n".join(lines) + "\n"


def traffic_line(result: dict) -> str:
    traffic = result["traffic"]
    if not traffic.get("measured"):
        implied = [cell["implied_bytes"] / cell["model_bytes"] for cell in result["decode"]]
        return (f"{traffic['reason']}; implied by time x measured bandwidth: "
                f"{_g(min(implied))}-{_g(max(implied))} x the model's bytes (implied, not counted)")
    return "; ".join(f"context {row['context_tokens']:.0f} batch {row['batch']}: "
                     f"{_g(row['dram_bytes'] / row['model_bytes'])} x the model's bytes"
                     for row in traffic["cells"]) + f" ({traffic['tool']})"
