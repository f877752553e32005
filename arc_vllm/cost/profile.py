"""``arc-vllm profile``: the roofline checked against a real engine on this machine.

    arc-vllm profile --out runs/profile                         # vLLM, the embedded model
    arc-vllm profile --trace runs/niah-model/results.jsonl --out runs/profile-trace
    arc-vllm profile --engine torch --model Qwen3-8B --out DIR   # a GPU with torch, no vLLM

1. Calibrates the device (``cost.calibrate``): copy bandwidth, matmul FLOP/s, memory. On a CPU
   the roofline is instantiated with these figures; on a GPU with the datasheet figures of
   ``specs.json`` (``--hardware auto`` reads the device name), the measured ones beside them.
2. Measures decode step time per (context, batch) cell, prefill time per prompt length, the KV
   bytes held per token and peak memory: on vLLM (``cost.engine_vllm``) or as plain torch
   steps with a spec'd model's shapes (``cost.engine_torch``). Cleanly: the engine is warmed
   up by an untimed cell first; every cell is visited ``--repeats`` times, the visits in a
   shuffled order (so that drift does not pass for a trend); a cell's figure is the median of
   its visits, with their spread; the load average is recorded before and after.
3. Compares every cell with the roofline for the same shape, and fits decode time against L
   and against 1/batch (``cost.comparison``); fits the calibrated model (the roofline's terms
   plus a per-step cost, ``cost.calibrated``) on half the cells and reports it on the other
   half. ``--compare PROFILE_JSON`` sets the fit beside an earlier run's.
4. With ``--trace``, replays a sample of a benchmark's recorded calls per method
   (``cost.trace``).
5. Reads DRAM traffic with ``ncu`` or ``rocprofv3`` when one is on PATH (torch engine on a
   GPU); otherwise says "not measured" and gives the bytes implied by time x bandwidth.

Writes DIR/profile.json, DIR/profile.md and DIR/decode.png. ``python -m arc_vllm.cost.profile``
is the same command (the GPU check runs it without installing the project).
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import random
import shutil
import statistics
import sys
from pathlib import Path
from typing import Protocol

from arc_vllm.cost import calibrated
from arc_vllm.cost.calibrate import calibrate, peak_memory_bytes
from arc_vllm.cost.comparison import compare_cells, fits, within
from arc_vllm.cost.profile_report import markdown
from arc_vllm.cost.roofline import SPECS, Hardware, Model, decode_step_bytes, prefill_seconds

logger = logging.getLogger(__name__)

DEFAULT_CONTEXTS = (256, 1024, 2048, 4096, 8192)
DEFAULT_BATCHES = (1, 4, 16)


def hardware_for(choice: str, calibration: dict, device: str) -> tuple[Hardware, str]:
    """The roofline's machine and where its figures come from."""
    if choice == "cpu" or (choice == "auto" and device == "cpu"):
        return Hardware.measured(calibration), "measured (calibration)"
    if choice == "auto":
        named = [name for name in SPECS["hardware"] if name.lower() in calibration["device"].lower()]
        if not named:
            return Hardware.measured(calibration), "measured (no datasheet for this device)"
        choice = named[0]
    return Hardware.named(choice), f"datasheet ({SPECS['hardware'][choice]['source']})"


def model_for(name: str | None, engine: str, device: str) -> tuple[str, Model]:
    """(what the engine loads, the roofline's model)."""
    if name is None:
        if engine == "torch":
            name = "Qwen3-8B" if device != "cpu" else "SmolLM2-135M-Instruct"
        else:
            from arc_vllm.model_prep import default_model_dir

            name = str(default_model_dir(require=True))
    if Path(name).is_dir():
        return name, Model.from_folder(name)
    if engine == "vllm":
        raise ProfileError(f"--model {name}: the vLLM engine needs a model folder")
    return name, Model.named(name)


def traffic_counters(model_name: str, cells: list[dict], device: str) -> dict:
    """DRAM bytes per decode step from ncu/rocprofv3 around the torch step, where present."""
    from arc_vllm.cost.counters import measure_traffic

    tool = shutil.which("ncu") or shutil.which("rocprofv3")
    if device == "cpu" or tool is None:
        return {"measured": False, "reason": "not measured: no ncu or rocprofv3 on PATH"
                if device != "cpu" else "not measured: no DRAM counters are read on CPU"}
    return measure_traffic(tool, model_name, cells)


def progress(cell: dict) -> None:
    logger.info("[profile] context %s batch %s: %.1f ms per decode step", cell["nominal_context"],
                cell["batch"], 1e3 * cell["measured_s"])


class ProfiledEngine(Protocol):
    """What ``profile`` measures through, for either engine: ``cost/engine_vllm.EngineProbe``
    (the real engine) or ``cost/engine_torch.TorchDecode`` (plain torch decode steps)."""

    reads_counters: bool  # DRAM counters (ncu/rocprofv3) can wrap its step
    max_prompt: int | None  # the longest prompt a real call may have (None: it runs no calls)

    def decode_cell(self, context: int, batch: int, steps: int) -> dict: ...

    def prefill_seconds(self, prompt_tokens: int) -> float | None: ...  # None: not measured

    def kv_bytes(self, cells: list[dict], model: Model) -> dict: ...

    def call_seconds(self, prompt_tokens: int, generated_tokens: int) -> float: ...


def open_engine(engine: str, loaded: str, model: Model, device: str, contexts, batches,
                kv_cache_gib: float | None, longest_call: int) -> ProfiledEngine:
    if engine == "vllm":
        from arc_vllm.cost.engine_vllm import EngineProbe

        if kv_cache_gib is None:  # every context's prompts cached at once (at most 8 GiB), a margin
            largest = max(batches) * (max(contexts) + 512) * model.kv_bytes_per_token
            every = max(batches) * (sum(contexts) + 512 * len(contexts)) * model.kv_bytes_per_token
            kv_cache_gib = max(1, math.ceil(1.25 * max(largest, min(every, 8 * 2 ** 30)) / 2 ** 30))
        return EngineProbe(loaded, max(max(contexts), longest_call), max(batches), kv_cache_gib)
    from arc_vllm.cost.engine_torch import TorchDecode

    return TorchDecode(model, device)


class ProfileError(ValueError):
    """A profile that cannot be run as asked (the CLI reports it and exits)."""


def measure(probe: ProfiledEngine, contexts, batches, steps: int, repeats: int, seed: int = 0) -> list[dict]:
    """Every (context, batch) cell ``repeats`` times, in a shuffled order, after an untimed
    warm-up cell; per cell the median of its visits and their spread."""
    probe.decode_cell(min(contexts), min(batches), steps)  # warm-up: first-call costs land here
    visits = [(context, batch) for context in contexts for batch in batches] * repeats
    random.Random(seed).shuffle(visits)
    seen: dict[tuple[int, int], list[dict]] = {}
    for context, batch in visits:
        cell = probe.decode_cell(context, batch, steps)
        seen.setdefault((context, batch), []).append(cell)
        progress(cell)
    cells = []
    for (context, batch), runs in sorted(seen.items()):
        times = [run["measured_s"] for run in runs]
        median = statistics.median(times)
        cells.append({**runs[0], "context_tokens": statistics.mean(run["context_tokens"] for run in runs),
                      "measured_s": median, "visits_s": times, "spread": (max(times) - min(times)) / median,
                      "step_times_s": [t for run in runs for t in run["step_times_s"]]})
    return cells


def profile(engine: str = "vllm", model_name: str | None = None, hardware_choice: str = "auto",
            contexts=DEFAULT_CONTEXTS, batches=DEFAULT_BATCHES, steps: int = 6,
            trace: str | None = None, trace_calls: int = 8, kv_cache_gib: float | None = None,
            repeats: int = 3) -> dict:
    if trace and engine != "vllm":  # before anything is measured
        raise ProfileError("--trace needs the vLLM engine (prefill and decode of real calls)")
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    calibration = calibrate(device)
    hardware, hardware_source = hardware_for(hardware_choice, calibration, device)
    loaded, model = model_for(model_name, engine, device)
    cells, prefill, rows, longest = [], [], [], 0
    if trace:
        from arc_vllm.cost.report import calls_of
        from arc_vllm.reports.summary import load_results

        rows = load_results(Path(trace))
        longest = max((call.prompt_tokens + call.generated_tokens for call in calls_of(rows)), default=0)
    probe = open_engine(engine, loaded, model, device, contexts, batches, kv_cache_gib, longest)
    load_before = os.getloadavg()
    cells = measure(probe, contexts, batches, steps, repeats)
    for context in contexts:
        measured = probe.prefill_seconds(context)
        if measured is not None:
            prefill.append({"prompt_tokens": context, "measured_s": measured,
                            "predicted_s": prefill_seconds(model, hardware, context)})
    kv = probe.kv_bytes(cells, model)
    compared = compare_cells(cells, model, hardware)
    for cell in compared:
        cell["implied_bytes"] = cell["measured_s"] * calibration["copy_bytes_per_s"]
        cell["model_bytes"] = decode_step_bytes(model, cell["context_tokens"], cell["batch"])
        # The bandwidth the engine would need to reach for the model's bytes in the measured time.
        cell["effective_bytes_per_s"] = cell["model_bytes"] / cell["measured_s"]
        cell.pop("kv", None)
    result = {"engine": engine, "device": device, "model": model.__dict__, "loaded": loaded,
              "calibration": calibration, "hardware": dict(hardware.__dict__, source=hardware_source),
              "decode": compared, "prefill": prefill, "fit": fits(compared, model, hardware),
              "calibrated": calibrated.report(compared, model, hardware),
              "measurement": {"repeats": repeats, "steps": steps, "order": "shuffled, after a warm-up cell",
                              "load_average_before": load_before, "load_average_after": os.getloadavg(),
                              "cpus": os.cpu_count(), "worst_spread": max(cell["spread"] for cell in compared)},
              "kv_bytes": kv, "peak_memory_bytes": peak_memory_bytes(device),
              "traffic": traffic_counters(loaded, compared, device) if probe.reads_counters else
              {"measured": False, "reason": "not measured: counters are read around the torch step"}}
    checked = calibrated.of(result["calibrated"], checked=True)
    for cell in compared:  # the checked model's line, for the plot
        cell["calibrated_s"] = checked.predict(model, hardware, cell["context_tokens"], cell["batch"])
    ratios = [cell["ratio"] for cell in compared]
    result["targets"] = {"ratios_within_0.67_1.5": within(ratios),
                         "cells_within": sum(within([r]) for r in ratios), "cells": len(ratios),
                         "fit_r2_at_least_0.9": result["fit"]["r2"] >= 0.9}
    if trace:
        from arc_vllm.cost.trace import replay_trace

        run_call = (lambda call: probe.call_seconds(call.prompt_tokens, call.generated_tokens))
        result["trace"] = dict(replay_trace(rows, run_call, model, hardware, trace_calls, probe.max_prompt,
                                            calibrated=calibrated.of(result["calibrated"])),
                               file=str(trace))
    return result


def compare_runs(result: dict, previous: dict, path: str) -> dict:
    """This run's fitted per-step cost beside an earlier run's, and what the machine was doing."""
    now, then = result["calibrated"]["t_step_s"], previous["calibrated"]["t_step_s"]
    difference = abs(now - then) / max(now, then) if max(now, then) > 0 else 0.0
    return {"file": path, "t_step_s": now, "previous_t_step_s": then, "relative_difference": difference,
            "within_10_percent": difference <= 0.10,
            "k_mem": result["calibrated"]["k_mem"], "previous_k_mem": previous["calibrated"]["k_mem"],
            "load_average": result["measurement"]["load_average_before"],
            "previous_load_average": previous.get("measurement", {}).get("load_average_before")}


def write(result: dict, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "profile.json").write_text(json.dumps(result, indent=1))
    (out / "profile.md").write_text(markdown(result))
    try:
        from arc_vllm.reports.plots import plot_decode

        plot_decode(result["decode"], out / "decode.png",  # measured, roofline, calibrated
                    f"{result['model']['name']} on {result['calibration']['device']} ({result['engine']})")
    except ImportError as error:  # a GPU machine without matplotlib still gets the JSON
        (out / "decode.png.missing").write_text(f"no plot: {error}\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="arc-vllm profile", description=__doc__.splitlines()[0])
    parser.add_argument("--engine", choices=("vllm", "torch"), default="vllm",
                        help="vllm: the real engine; torch: plain torch decode steps with a spec'd "
                             "model's shapes (a GPU without vLLM)")
    parser.add_argument("--model", default=None, help="model folder, or (torch) a name from "
                        "cost/specs.json; default: the embedded model (torch on a GPU: Qwen3-8B)")
    parser.add_argument("--hardware", default="auto", help="auto, cpu, or a name from cost/specs.json")
    parser.add_argument("--contexts", default="256,1024,2048,4096,8192", help="decode contexts L")
    parser.add_argument("--batches", default="1,4,16", help="decode batch sizes")
    parser.add_argument("--steps", type=int, default=6, help="decode steps timed per cell (median)")
    parser.add_argument("--trace", default=None, help="a benchmark's results.jsonl to replay")
    parser.add_argument("--trace-calls", type=int, default=8, help="calls replayed per method")
    parser.add_argument("--repeats", type=int, default=3, help="visits of every cell, in a shuffled order")
    parser.add_argument("--compare", default=None, metavar="PROFILE_JSON",
                        help="an earlier run's profile.json: set this run's fit beside it")
    parser.add_argument("--out", default="runs/profile")
    args = parser.parse_args(argv)
    try:
        contexts = [int(v) for v in args.contexts.split(",") if v]
        batches = [int(v) for v in args.batches.split(",") if v]
    except ValueError:
        parser.error("--contexts and --batches: comma-separated integers")
    if not contexts or not batches or min(contexts + batches) < 1 or args.steps < 1:
        parser.error("--contexts, --batches and --steps must be positive")
    if args.trace and not os.path.isfile(args.trace):
        parser.error(f"--trace: no such file {args.trace}")
    if args.compare and not os.path.isfile(args.compare):
        parser.error(f"--compare: no such file {args.compare}")
    if args.repeats < 1:
        parser.error("--repeats must be positive")
    from arc_vllm.offline import go_offline, in_process_engine

    go_offline()
    in_process_engine()
    os.environ.setdefault("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "1")  # timing past the trained window is fine
    try:
        result = profile(args.engine, args.model, args.hardware, contexts, batches, args.steps,
                         args.trace, args.trace_calls, repeats=args.repeats)
    except ValueError as error:
        parser.error(str(error))
    if args.compare:
        result["against_previous"] = compare_runs(result, json.loads(Path(args.compare).read_text()), args.compare)
    write(result, Path(args.out))
    print(markdown(result))
    print(f"wrote {os.path.join(args.out, 'profile.json')}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
