"""PNG plots next to the tables: accuracy per method (error bars: SD over seeds) and HBM
traffic per success (from the roofline). matplotlib with the Agg backend (no display).

Written by ``arc-vllm report DIR`` (accuracy.png), ``arc-vllm cost DIR`` (hbm_*.png) and
``arc-vllm profile`` (decode.png).
"""

from __future__ import annotations

from pathlib import Path


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _bars(groups: dict[str, dict[str, tuple[float, float]]], methods: list[str], ylabel: str, path: Path,
          ylim: float | None = None) -> Path:
    """One bar per method in every group (a setting, a hardware); values are (height, error)."""
    plt = _pyplot()
    figure, axes = plt.subplots(figsize=(max(6, 1.2 * len(methods) * max(len(groups), 1)), 4))
    width = 0.8 / max(len(groups), 1)
    for offset, (label, values) in enumerate(groups.items()):
        xs = [i + offset * width for i in range(len(methods))]
        heights = [values.get(m, (0.0, 0.0))[0] for m in methods]
        errors = [values.get(m, (0.0, 0.0))[1] for m in methods]
        axes.bar(xs, heights, width, yerr=errors, capsize=3, label=label or None)
    axes.set_xticks([i + width * (len(groups) - 1) / 2 for i in range(len(methods))], methods, rotation=20)
    axes.set_ylabel(ylabel)
    if ylim is not None:
        axes.set_ylim(0, ylim)
    if len(groups) > 1:
        axes.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path


def plot_accuracy(summary: dict, path: Path) -> Path:
    parts = summary.get("settings") or {"": {"methods": summary["methods"]}}
    groups = {label: {m: (100 * f["mean_accuracy"], 100 * f["sd_accuracy"]) for m, f in part["methods"].items()}
              for label, part in parts.items()}
    return _bars(groups, list(summary["methods"]), "accuracy (%), mean +- SD over seeds", path, ylim=105)


def plot_hbm(groups: dict[str, dict[str, float]], path: Path) -> Path:
    """Decode HBM traffic per success (TB); methods without a success are left out."""
    methods = sorted({m for values in groups.values() for m in values})
    return _bars({label: {m: (v, 0.0) for m, v in values.items()} for label, values in groups.items()},
                 methods, "decode HBM traffic per success (TB)", path)


def plot_decode(cells: list[dict], path: Path, title: str) -> Path:
    """Decode step time against context, per batch: measured (points), the roofline (dashed)
    and, where the cells carry it, the calibrated model (dotted)."""
    plt = _pyplot()
    figure, axes = plt.subplots(figsize=(6.5, 4.2))
    for index, batch in enumerate(sorted({cell["batch"] for cell in cells})):
        chosen = sorted((c for c in cells if c["batch"] == batch), key=lambda c: c["context_tokens"])
        color = f"C{index}"
        xs = [c["context_tokens"] for c in chosen]
        axes.plot(xs, [1e3 * c["measured_s"] for c in chosen], "o-", color=color,
                  label=f"batch {batch} measured")
        axes.plot(xs, [1e3 * c["predicted_s"] for c in chosen], "--", color=color,
                  label=f"batch {batch} roofline")
        if all("calibrated_s" in c for c in chosen):
            axes.plot(xs, [1e3 * c["calibrated_s"] for c in chosen], ":", color=color,
                      label=f"batch {batch} calibrated")
    axes.set_xscale("log", base=2)
    axes.set_xlabel("context tokens")
    axes.set_ylabel("decode step (ms)")
    axes.set_title(title, fontsize=9)
    axes.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path
