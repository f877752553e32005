"""Replay a benchmark's recorded calls on the engine: is the roofline's saving real here?

A benchmark's ``results.jsonl`` holds, per attempt, every model call's prompt and generated
tokens (``trace``). Per method, an evenly spaced sample of those calls is run on the engine
(random tokens of the recorded lengths, one at a time, prefix caching off: every prompt token
is prefilled, as the roofline counts it). Per method:

    measured s/success   = mean measured s per sampled call * calls / successes
    modelled s/success   = sum over every call of the roofline at batch 1 / successes
    calibrated s/success = the same with the calibrated step model (``cost.calibrated``: the
                           roofline's terms plus the engine's per-step cost) for decode

and the ratio of one method to the baseline (sliding_window by default), measured beside
modelled; the same per attempt (defined where a method has no success). Batch 1 is what the replay runs; the paper's batched figures are ``arc-vllm cost``.
"""

from __future__ import annotations

import math

from arc_vllm.cost.report import calls_of
from arc_vllm.cost.roofline import Call, Hardware, Model, decode_step_seconds, prefill_seconds


def call_seconds(call: Call, model: Model, hardware: Hardware) -> float:
    """The roofline of one call at batch 1: its prefill, then one step per generated token."""
    decode = call.generated_tokens * decode_step_seconds(model, hardware, call.context, 1)["predicted_s"]
    return prefill_seconds(model, hardware, call.prompt_tokens) + decode


def calibrated_call_seconds(call: Call, model: Model, hardware: Hardware, calibrated) -> float:
    """One call at batch 1 with the calibrated step model for its decode steps (its prefill as
    the roofline has it: the calibration is of decode steps)."""
    decode = call.generated_tokens * calibrated.predict(model, hardware, call.context, 1)
    return prefill_seconds(model, hardware, call.prompt_tokens) + decode


def sample(calls: list[Call], count: int) -> list[Call]:
    if len(calls) <= count:
        return list(calls)
    return [calls[round(i * (len(calls) - 1) / (count - 1))] for i in range(count)] if count > 1 \
        else [calls[len(calls) // 2]]


def replay_trace(rows: list[dict], run_call, model: Model, hardware: Hardware,
                 calls_per_method: int = 8, max_prompt_tokens: int | None = None,
                 baseline: str = "sliding_window", calibrated=None) -> dict:
    """``run_call(Call) -> seconds`` runs one call on the engine; ``calibrated`` (a
    ``cost.calibrated.Calibrated``) adds the calibrated model's figures beside the roofline's."""
    methods: dict[str, list[dict]] = {}
    for row in rows:
        methods.setdefault(row["method"], []).append(row)
    out = {}
    for method, attempts in sorted(methods.items()):
        calls = calls_of(attempts)
        successes = sum(bool(row.get("passed")) for row in attempts)
        chosen = sample(calls, calls_per_method)
        if max_prompt_tokens is not None:
            chosen = [Call(min(c.prompt_tokens, max_prompt_tokens), c.generated_tokens) for c in chosen]
        measured = [run_call(call) for call in chosen]
        modelled_sample = [call_seconds(call, model, hardware) for call in chosen]
        per_success = successes or math.nan
        mean_measured = sum(measured) / len(measured) if measured else math.nan
        modelled_total = sum(call_seconds(c, model, hardware) for c in calls)
        out[method] = {
            "attempts": len(attempts), "successes": successes, "calls": len(calls),
            "sampled_calls": len(chosen),
            "sample_measured_over_modelled": sum(measured) / sum(modelled_sample) if chosen else math.nan,
            "measured_s_per_attempt": mean_measured * len(calls) / len(attempts),
            "modelled_s_per_attempt": modelled_total / len(attempts),
            "measured_s_per_success": mean_measured * len(calls) / per_success,
            "modelled_s_per_success": modelled_total / per_success}
        if calibrated is not None:
            total = sum(calibrated_call_seconds(c, model, hardware, calibrated) for c in calls)
            out[method].update(calibrated_s_per_attempt=total / len(attempts),
                               calibrated_s_per_success=total / per_success)
    kinds = ("measured", "modelled") + (("calibrated",) if calibrated is not None else ())
    if baseline in out:
        base = out[baseline]
        for figures in out.values():
            for kind in kinds:
                figures[f"{kind}_ratio_to_baseline"] = (figures[f"{kind}_s_per_success"]
                                                        / base[f"{kind}_s_per_success"])
                # Per attempt too: defined where a method has no success.
                figures[f"{kind}_attempt_ratio_to_baseline"] = (figures[f"{kind}_s_per_attempt"]
                                                                / base[f"{kind}_s_per_attempt"])
    return {"baseline": baseline, "methods": out}
