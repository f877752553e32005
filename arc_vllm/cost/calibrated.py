"""The calibrated step model: the roofline's two terms plus the engine's own per-step cost,
fitted to one half of the measured cells and checked on the other.

    t(L, b) = t_step + k_mem * memory_s(L, b) + k_flop * compute_s(L, b)

``memory_s`` = (M_w + b L kv_b) / BW and ``compute_s`` = b (2P + 4 layers heads d L) / F are
the roofline's own terms (``cost.roofline.decode_step_seconds``); the roofline is their
maximum, with no per-step term. ``t_step`` is what every step costs whatever its shape (on a
CPU: vLLM's scheduler, sampling, Python; on a GPU: kernel launches and the scheduler), and the
k's say how far the engine is from the machine's measured bandwidth and FLOP rate. The three
coefficients are non-negative, fitted by least squares on relative error (every cell counts
alike, a 25 ms cell as much as a 280 ms one), exactly: the best of the unconstrained fits over
every subset of the terms whose coefficients are all non-negative (the non-negative least
squares optimum is one of them).

The cells are split like a checkerboard over (context index, batch index): half fit, the
other half held out, so that every context and every batch is on both sides. The report's
figure of merit is the held-out cells' measured / predicted, which is what a user planning
with the model on their own server would see.

Pure arithmetic (numpy); ``cost.profile`` fills the cells. Run ``python -m
arc_vllm.cost.calibrated`` for a fit of a small synthetic table.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

import numpy as np

from arc_vllm.cost.roofline import Hardware, Model, decode_step_seconds

TERMS = ("t_step_s", "k_mem", "k_flop")
HELD_OUT_RANGE = (0.75, 1.33)


@dataclass(frozen=True)
class Calibrated:
    t_step_s: float
    k_mem: float
    k_flop: float

    def predict(self, model: Model, hardware: Hardware, context: float, batch: int) -> float:
        terms = decode_step_seconds(model, hardware, context, batch)
        return self.t_step_s + self.k_mem * terms["memory_s"] + self.k_flop * terms["compute_s"]


def design(cells: list[dict], model: Model, hardware: Hardware) -> np.ndarray:
    """Each cell's (1, memory_s, compute_s)."""
    rows = []
    for cell in cells:
        terms = decode_step_seconds(model, hardware, cell["context_tokens"], cell["batch"])
        rows.append((1.0, terms["memory_s"], terms["compute_s"]))
    return np.array(rows)


def fit(cells: list[dict], model: Model, hardware: Hardware) -> Calibrated:
    """Non-negative least squares on relative error over ``cells``."""
    x = design(cells, model, hardware)
    y = np.array([cell["measured_s"] for cell in cells])
    weighted_x, weighted_y = x / y[:, None], np.ones_like(y)  # (x c - y) / y
    best, best_residual = np.zeros(3), float("inf")
    for size in (1, 2, 3):
        for chosen in combinations(range(3), size):
            coefficients, *_ = np.linalg.lstsq(weighted_x[:, chosen], weighted_y, rcond=None)
            if np.any(coefficients < 0):
                continue
            full = np.zeros(3)
            full[list(chosen)] = coefficients
            residual = float(np.sum((weighted_x @ full - weighted_y) ** 2))
            if residual < best_residual:
                best, best_residual = full, residual
    return Calibrated(*map(float, best))


def split(cells: list[dict]) -> tuple[list[dict], list[dict]]:
    """(fitted, held out): a checkerboard over the cells' context and batch indices."""
    contexts = sorted({cell["nominal_context"] for cell in cells})
    batches = sorted({cell["batch"] for cell in cells})
    fitted, held_out = [], []
    for cell in cells:
        parity = contexts.index(cell["nominal_context"]) + batches.index(cell["batch"])
        (fitted if parity % 2 == 0 else held_out).append(cell)
    return fitted, held_out


def report(cells: list[dict], model: Model, hardware: Hardware) -> dict:
    """The fit on one half, every held-out cell's measured and predicted, the worst ratio; and
    the fit on every cell (what to plan with once the check is passed)."""
    fitted, held_out = split(cells)
    calibrated = fit(fitted, model, hardware)
    rows = []
    for cell in held_out:
        predicted = calibrated.predict(model, hardware, cell["context_tokens"], cell["batch"])
        rows.append({"context": round(cell["context_tokens"], 1), "batch": cell["batch"],
                     "measured_s": cell["measured_s"], "predicted_s": predicted,
                     "ratio": cell["measured_s"] / predicted})
    ratios = [row["ratio"] for row in rows]
    worst = max(ratios, key=lambda ratio: max(ratio, 1 / ratio)) if ratios else float("nan")
    low, high = HELD_OUT_RANGE
    every = fit(cells, model, hardware)
    return {"t_step_s": calibrated.t_step_s, "k_mem": calibrated.k_mem, "k_flop": calibrated.k_flop,
            "fitted_cells": [{"context": round(c["context_tokens"], 1), "batch": c["batch"]} for c in fitted],
            "held_out": rows, "worst_ratio": worst,
            "held_out_within": all(low <= ratio <= high for ratio in ratios), "range": [low, high],
            "all_cells": {"t_step_s": every.t_step_s, "k_mem": every.k_mem, "k_flop": every.k_flop}}


def of(report_dict: dict, checked: bool = False) -> Calibrated:
    """The model a profile's ``calibrated`` section holds: fitted on every cell, or (``checked``)
    the one fitted on half and checked on the other half."""
    chosen = report_dict if checked else report_dict["all_cells"]
    return Calibrated(*(chosen[term] for term in TERMS))


if __name__ == "__main__":
    import json

    model = Model("hand", parameters=1e6, layers=2, attention_heads=2, kv_heads=1, head_size=4, dtype_bytes=2)
    hardware = Hardware("hand", hbm_bytes=1e9, bandwidth_bytes_s=1e9, flops=1e12)
    truth = Calibrated(0.02, 2.5, 0.0)
    cells = [{"nominal_context": context, "context_tokens": context, "batch": batch,
              "measured_s": truth.predict(model, hardware, context, batch)}
             for context in (256, 1024, 4096) for batch in (1, 4, 16)]
    print(json.dumps(report(cells, model, hardware), indent=1))
