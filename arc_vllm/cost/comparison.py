"""Measured against predicted: the per-cell ratio and the linear fits of decode time.

For each measured decode cell (context L, batch b, measured seconds per step) the roofline
predicts ``max((M_w + b L kv_b) / BW, b (2 P + 4 layers heads d L) / F)``; the ratio is
measured / predicted. Two fits test the model's shape rather than its level:

- against L, per batch b: ``t = intercept + slope * L``, to compare with slope
  ``b kv_b / BW`` and intercept ``M_w / BW`` (the memory-bound roofline);
- against 1/b, per context L: time per token ``t / b = intercept + slope / b``, to compare with
  slope ``M_w / BW`` (the weights shared by the batch) and intercept ``L kv_b / BW``.

R^2 is that of the least-squares line. Pure arithmetic; ``cost.profile`` fills the cells.
"""

from __future__ import annotations

import math

from arc_vllm.cost.roofline import Hardware, Model, decode_step_seconds


def linear_fit(xs: list[float], ys: list[float]) -> dict:
    """Least squares y = intercept + slope * x, with R^2 (NaN for fewer than 2 distinct x)."""
    n = len(xs)
    mean_x, mean_y = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mean_x) ** 2 for x in xs)
    if n < 2 or sxx == 0:
        return {"slope": math.nan, "intercept": math.nan, "r2": math.nan, "points": n}
    slope = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys)) / sxx
    intercept = mean_y - slope * mean_x
    total = sum((y - mean_y) ** 2 for y in ys)
    residual = sum((y - intercept - slope * x) ** 2 for x, y in zip(xs, ys))
    return {"slope": slope, "intercept": intercept, "r2": 1 - residual / total if total else 1.0,
            "points": n}


def compare_cells(cells: list[dict], model: Model, hardware: Hardware) -> list[dict]:
    """Each ``{context_tokens, batch, measured_s}`` with the roofline's prediction and ratio."""
    out = []
    for cell in cells:
        predicted = decode_step_seconds(model, hardware, cell["context_tokens"], cell["batch"])
        out.append(dict(cell, **predicted, ratio=cell["measured_s"] / predicted["predicted_s"]))
    return out


def fits(cells: list[dict], model: Model, hardware: Hardware) -> dict:
    """The fits against L (per batch) and against 1/batch (per nominal context)."""
    bandwidth = hardware.bandwidth_bytes_s
    against_context = {}
    for batch in sorted({cell["batch"] for cell in cells}):
        chosen = [cell for cell in cells if cell["batch"] == batch]
        fit = linear_fit([c["context_tokens"] for c in chosen], [c["measured_s"] for c in chosen])
        against_context[str(batch)] = dict(
            fit, model_slope=batch * model.kv_bytes_per_token / bandwidth,
            model_intercept=model.weight_bytes / bandwidth)
    against_batch = {}
    for nominal in sorted({cell["nominal_context"] for cell in cells}):
        chosen = [cell for cell in cells if cell["nominal_context"] == nominal]
        fit = linear_fit([1 / c["batch"] for c in chosen], [c["measured_s"] / c["batch"] for c in chosen])
        mean_context = sum(c["context_tokens"] for c in chosen) / len(chosen)
        against_batch[str(nominal)] = dict(
            fit, model_slope=model.weight_bytes / bandwidth,
            model_intercept=mean_context * model.kv_bytes_per_token / bandwidth)
    r2 = [fit["r2"] for fit in against_context.values() if not math.isnan(fit["r2"])]
    return {"against_context": against_context, "against_inverse_batch": against_batch,
            "r2": min(r2) if r2 else math.nan}


def within(ratios: list[float], low: float = 0.67, high: float = 1.5) -> bool:
    return all(low <= ratio <= high for ratio in ratios)
