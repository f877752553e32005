"""DRAM traffic from hardware counters: ``ncu`` (NVIDIA) or ``rocprofv3`` (AMD) around one
torch decode step (``cost.engine_torch``, inside an NVTX range named ``decode_step``).

torch's own profiler collects no DRAM counters (its CUPTI range profiler is compiled out of the
PyPI wheels; Kineto on ROCm reads none), so the counters come from these tools when they are
on PATH. Neither is installed on this project's machines: there, ``cost.profile`` reports
"not measured" and the bytes implied by time x measured bandwidth instead.
"""

from __future__ import annotations

import csv
import io
import os
import subprocess
import sys
import tempfile
from pathlib import Path

UNITS = {"byte": 1, "kbyte": 1e3, "mbyte": 1e6, "gbyte": 1e9, "tbyte": 1e12}
NCU_METRICS = ("dram__bytes_read.sum", "dram__bytes_write.sum")
ROCPROF_COUNTERS = ("FETCH_SIZE", "WRITE_SIZE")  # kilobytes, per kernel


def ncu_bytes(csv_text: str) -> float:
    """Sum of ncu's DRAM read and write bytes over every kernel of its ``--csv`` output."""
    start = csv_text.find('"ID"')
    total = 0.0
    for row in csv.DictReader(io.StringIO(csv_text[start:] if start >= 0 else csv_text)):
        if row.get("Metric Name") in NCU_METRICS:
            value = float(row["Metric Value"].replace(",", ""))
            total += value * UNITS[row.get("Metric Unit", "byte").lower()]
    return total


def rocprof_bytes(csv_text: str) -> float:
    """Sum of FETCH_SIZE and WRITE_SIZE (kilobytes) over rocprofv3's counter-collection rows."""
    total = 0.0
    for row in csv.DictReader(io.StringIO(csv_text)):
        if row.get("Counter_Name") in ROCPROF_COUNTERS:
            total += float(row["Counter_Value"]) * 1e3
    return total


def step_command(model_name: str, context: int, batch: int, steps: int = 1) -> list[str]:
    return [sys.executable, "-m", "arc_vllm.cost.engine_torch", "--model", model_name,
            "--context", str(context), "--batch", str(batch), "--steps", str(steps), "--nvtx"]


def rocprof_run(tool: str, model_name: str, context: int, batch: int, steps: int, timeout: int) -> float:
    with tempfile.TemporaryDirectory() as folder:
        command = [tool, "--pmc", *ROCPROF_COUNTERS, "--output-format", "csv", "-d", folder,
                   "-o", "decode", "--", *step_command(model_name, context, batch, steps)]
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        if done.returncode != 0:
            raise RuntimeError(f"rocprofv3 failed: {done.stderr[-1000:]}")
        files = sorted(Path(folder).rglob("*counter_collection.csv"))
        if not files:
            raise RuntimeError(f"rocprofv3 wrote no counter_collection.csv under {folder}")
        return sum(rocprof_bytes(path.read_text()) for path in files)


def measure_cell(tool: str, model_name: str, context: int, batch: int, timeout: int = 240) -> float:
    if Path(tool).name == "ncu":
        command = [tool, "--metrics", ",".join(NCU_METRICS), "--csv", "--nvtx",
                   "--nvtx-include", "decode_step/", "--target-processes", "all",
                   *step_command(model_name, context, batch)]
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        if done.returncode != 0:
            raise RuntimeError(f"ncu failed: {done.stderr[-1000:]}")
        return ncu_bytes(done.stdout)
    # rocprofv3 counts every kernel of the process (set-up included): the difference between
    # three timed steps and one is two steps.
    one = rocprof_run(tool, model_name, context, batch, 1, timeout)
    three = rocprof_run(tool, model_name, context, batch, 3, timeout)
    return (three - one) / 2


def measure_traffic(tool: str, model_name: str, cells: list[dict], count: int = 1) -> dict:
    """Counters for the ``count`` smallest batch-1 cells (counter replay is slow)."""
    chosen = sorted((c for c in cells if c["batch"] == 1), key=lambda c: c["context_tokens"])[:count]
    rows = []
    for cell in chosen:
        try:
            dram = measure_cell(tool, model_name, int(cell["nominal_context"]), 1)
        except (RuntimeError, subprocess.TimeoutExpired, OSError) as error:
            return {"measured": False, "tool": tool, "reason": f"not measured: {error}"}
        rows.append({"context_tokens": cell["context_tokens"], "batch": 1, "dram_bytes": dram,
                     "model_bytes": cell["model_bytes"]})
    return {"measured": True, "tool": os.path.basename(tool), "cells": rows}
