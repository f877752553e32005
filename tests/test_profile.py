"""``arc-vllm profile``: the comparison's arithmetic against cells computed by hand, the counter
parsers, and the real paths: vLLM on the tiny model (with a recorded trace) and the torch step.

    pytest tests/test_profile.py
"""

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from arc_vllm.cost.comparison import compare_cells, fits, linear_fit, within
from arc_vllm.cost.counters import ncu_bytes, rocprof_bytes
from arc_vllm.cost.roofline import Call, Hardware, Model, decode_step_seconds
from arc_vllm.cost.trace import call_seconds, replay_trace, sample
from arc_vllm.model_prep import prepare_tiny

# kv_b = 2 layers * 2 (K,V) * 1 kv head * 4 dims * 2 bytes = 32 bytes per token; M_w = 2 MB
MODEL = Model("hand", parameters=1e6, layers=2, attention_heads=2, kv_heads=1, head_size=4, dtype_bytes=2)
MACHINE = Hardware("hand", hbm_bytes=1e9, bandwidth_bytes_s=1e9, flops=1e12)
# An earlier run to set a new one beside (``--compare``), written by ``arc-vllm profile --model
# <the tiny model> --contexts 128,512 --batches 1,2 --steps 2 --repeats 1`` on a 2-core Xeon,
# 2026-12-07: comparing with a stored run, not a second run in the test, spares an engine start.
PREVIOUS = Path(__file__).parent / "fixtures" / "profile" / "previous.json"


def test_a_memory_bound_cell_by_hand():
    # bytes = 2e6 + 2 * 100 * 32 = 2,006,400 -> 2.0064 ms at 1 GB/s
    # FLOPs = 2 * (2e6 + 4 * 2 * 2 * 4 * 100) = 4,012,800 -> 4.0128 us at 1 TFLOP/s
    [cell] = compare_cells([{"context_tokens": 100, "batch": 2, "measured_s": 3.0096e-3,
                             "nominal_context": 100}], MODEL, MACHINE)
    assert cell["memory_s"] == pytest.approx(2.0064e-3) and cell["compute_s"] == pytest.approx(4.0128e-6)
    assert cell["bound"] == "memory" and cell["predicted_s"] == pytest.approx(2.0064e-3)
    assert cell["ratio"] == pytest.approx(1.5)
    assert within([cell["ratio"]]) and not within([1.51])


def test_a_compute_bound_cell_by_hand():
    slow = Hardware("slow", 1e9, bandwidth_bytes_s=1e12, flops=1e9)
    figures = decode_step_seconds(MODEL, slow, 100, 2)
    assert figures["bound"] == "compute" and figures["predicted_s"] == pytest.approx(4.0128e-3)


def test_linear_fit_recovers_a_line_and_scores_noise():
    exact = linear_fit([1, 2, 3, 4], [3, 5, 7, 9])
    assert exact["slope"] == pytest.approx(2) and exact["intercept"] == pytest.approx(1)
    assert exact["r2"] == pytest.approx(1)
    # y = 0,2,1,3 on x = 0..3: slope 4/5, intercept 1.5 - 0.8 * 1.5 = 0.3, SSres 1.8, SStot 5 -> R^2 0.64
    noisy = linear_fit([0, 1, 2, 3], [0, 2, 1, 3])
    assert noisy["slope"] == pytest.approx(0.8) and noisy["intercept"] == pytest.approx(0.3)
    assert noisy["r2"] == pytest.approx(0.64)
    assert math.isnan(linear_fit([5, 5], [1, 2])["r2"])


def test_fits_compare_with_the_models_slope_and_intercept():
    cells = [{"context_tokens": L, "nominal_context": L, "batch": b,
              "measured_s": (2e6 + b * L * 32) / 1e9} for L in (100, 200, 400) for b in (1, 4)]
    result = fits(cells, MODEL, MACHINE)
    per_batch = result["against_context"]["4"]
    assert per_batch["slope"] == pytest.approx(per_batch["model_slope"]) == pytest.approx(4 * 32 / 1e9)
    assert per_batch["intercept"] == pytest.approx(per_batch["model_intercept"]) == pytest.approx(2e-3)
    per_context = result["against_inverse_batch"]["200"]
    assert per_context["slope"] == pytest.approx(2e-3) and per_context["intercept"] == pytest.approx(200 * 32 / 1e9)
    assert result["r2"] == pytest.approx(1)


def test_trace_replay_arithmetic_with_a_stand_in_engine():
    rows = [{"method": "arc", "passed": True, "trace": [["agent", 100, 10, None, 0], ["agent", 200, 10, None, 0]]},
            {"method": "arc", "passed": False, "trace": [["agent", 100, 10, None, 0]]},
            {"method": "sliding_window", "passed": True, "trace": [["agent", 400, 10, None, 0]] * 4}]
    # The stand-in engine takes exactly twice the roofline: measured/modelled is 2 everywhere.
    result = replay_trace(rows, lambda call: 2 * call_seconds(call, MODEL, MACHINE), MODEL, MACHINE)
    arc, window = result["methods"]["arc"], result["methods"]["sliding_window"]
    assert arc["calls"] == 3 and arc["successes"] == 1 and window["calls"] == 4
    assert arc["sample_measured_over_modelled"] == pytest.approx(2)
    modelled = sum(call_seconds(Call(p, 10), MODEL, MACHINE) for p in (100, 200, 100))
    assert arc["modelled_s_per_success"] == pytest.approx(modelled)
    assert arc["measured_s_per_success"] == pytest.approx(2 * modelled)  # mean x calls / successes
    assert arc["measured_ratio_to_baseline"] == pytest.approx(arc["modelled_ratio_to_baseline"])
    assert [c.prompt_tokens for c in sample([Call(i, 1) for i in range(10)], 3)] == [0, 4, 9]


def test_the_calibrated_model_recovers_a_known_engine_and_checks_itself_on_cells_it_was_not_fitted_on():
    from arc_vllm.cost import calibrated

    truth = calibrated.Calibrated(t_step_s=0.03, k_mem=2.5, k_flop=0.4)
    cells = [{"nominal_context": context, "context_tokens": context + 3, "batch": batch,
              "measured_s": truth.predict(MODEL, MACHINE, context + 3, batch)}
             for context in (256, 1024, 4096, 8192) for batch in (1, 4, 16)]
    fitted, held_out = calibrated.split(cells)
    assert len(fitted) == len(held_out) == 6 and not {id(c) for c in fitted} & {id(c) for c in held_out}
    # Every context and every batch is on both sides of the checkerboard.
    for key in ("nominal_context", "batch"):
        assert {c[key] for c in fitted} == {c[key] for c in held_out}
    report = calibrated.report(cells, MODEL, MACHINE)
    assert report["t_step_s"] == pytest.approx(0.03) and report["k_mem"] == pytest.approx(2.5)
    assert report["k_flop"] == pytest.approx(0.4)
    assert all(row["ratio"] == pytest.approx(1) for row in report["held_out"]) and report["held_out_within"]
    # Noise on the held-out half: the check says so, and names the worst cell.
    noisy = [dict(c, measured_s=c["measured_s"] * (1.5 if c in held_out[:1] else 1)) for c in cells]
    report = calibrated.report(noisy, MODEL, MACHINE)
    assert not report["held_out_within"] and report["worst_ratio"] == pytest.approx(1.5)
    # Coefficients never go negative, whatever the data say.
    falling = [dict(c, measured_s=0.05 - 1e-6 * c["context_tokens"]) for c in cells]
    import numpy as np

    x, y = calibrated.design(falling, MODEL, MACHINE), np.array([c["measured_s"] for c in falling])
    unconstrained, *_ = np.linalg.lstsq(x / y[:, None], np.ones_like(y), rcond=None)
    assert np.any(unconstrained < 0)  # these data do pull a coefficient below zero...
    fitted = list(calibrated.fit(falling, MODEL, MACHINE).__dict__.values())
    assert all(value >= 0 for value in fitted) and 0.0 in fitted  # ...which the fit holds at zero


def test_counter_parsers_read_the_tools_csv():
    ncu = ('==PROF== Connected to process\n"ID","Kernel Name","Metric Name","Metric Unit","Metric Value"\n'
           '"0","gemv","dram__bytes_read.sum","Mbyte","1,024.5"\n'
           '"0","gemv","dram__bytes_write.sum","Kbyte","2"\n'
           '"1","attn","dram__bytes_read.sum","byte","100"\n"1","attn","gpu__time_duration.sum","ns","5"\n')
    assert ncu_bytes(ncu) == pytest.approx(1024.5e6 + 2e3 + 100)
    rocprof = ('Dispatch_Id,Kernel_Name,Counter_Name,Counter_Value\n1,gemv,FETCH_SIZE,10\n'
               '1,gemv,WRITE_SIZE,2.5\n2,attn,GRBM_COUNT,7\n')
    assert rocprof_bytes(rocprof) == pytest.approx(12.5e3)


def run_profile(out: Path, *extra: str) -> dict:
    done = subprocess.run([str(Path(sys.executable).parent / "arc-vllm"), "profile", *extra,
                           "--out", str(out)], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Decode step: measured against the roofline" in done.stdout
    return json.loads((out / "profile.json").read_text())


@pytest.mark.slow
@pytest.mark.memory(4)  # the profiler's engine
@pytest.mark.quiet  # its cells' times are fitted and checked on held-out cells
def test_the_real_vllm_engine_profile_and_trace_on_the_tiny_model(tmp_path):
    trace = tmp_path / "results.jsonl"
    trace.write_text("\n".join(json.dumps(row) for row in [
        {"method": "arc", "passed": True, "trace": [["agent", 300, 4, None, 0], ["agent", 500, 4, None, 0]]},
        {"method": "sliding_window", "passed": True, "trace": [["agent", 900, 4, None, 0]] * 3}]) + "\n")
    result = run_profile(tmp_path / "vllm", "--model", str(prepare_tiny()), "--contexts", "128,512",
                         "--batches", "1,2", "--steps", "3", "--repeats", "2", "--trace", str(trace),
                         "--compare", str(PREVIOUS))
    assert {"copy_bytes_per_s", "flops_per_s", "memory_bytes"} <= set(result["calibration"])
    assert result["hardware"]["bandwidth_bytes_s"] == result["calibration"]["copy_bytes_per_s"]
    assert len(result["decode"]) == 4 and result["prefill"]
    for cell in result["decode"]:
        assert cell["measured_s"] > 0 and cell["ratio"] == pytest.approx(cell["measured_s"] / cell["predicted_s"])
        assert cell["context_tokens"] >= cell["nominal_context"]  # the tokens held while decoding
    assert "r2" in result["fit"] and set(result["fit"]["against_context"]) == {"1", "2"}
    kv = result["kv_bytes"]
    # Whole blocks are held, so the engine holds at least kv_b per token, and not double.
    assert kv["model_bytes_per_token"] <= kv["measured_bytes_per_token"] < 2 * kv["model_bytes_per_token"]
    assert result["peak_memory_bytes"] > 0 and result["traffic"]["measured"] is False
    methods = result["trace"]["methods"]
    assert methods["arc"]["sampled_calls"] == 2 and methods["sliding_window"]["calls"] == 3
    assert methods["sliding_window"]["measured_ratio_to_baseline"] == pytest.approx(1)
    assert (tmp_path / "vllm" / "decode.png").stat().st_size > 0
    assert "Recorded calls replayed" in (tmp_path / "vllm" / "profile.md").read_text()
    # Measured cleanly: each cell visited twice (shuffled, after a warm-up), its median kept.
    for cell in result["decode"]:
        assert len(cell["visits_s"]) == 2 and min(cell["visits_s"]) <= cell["measured_s"] <= max(cell["visits_s"])
    assert result["measurement"]["repeats"] == 2 and len(result["measurement"]["load_average_before"]) == 3
    # The calibrated model: fitted on half the cells, its figures on the other half.
    fit = result["calibrated"]
    assert len(fit["fitted_cells"]) == len(fit["held_out"]) == 2
    # Something of a step's time is explained (the fit clamps each coefficient at 0, so the sum,
    # not each one, is what it found): the predictions are of the measured time's order.
    assert fit["t_step_s"] + fit["k_mem"] + fit["k_flop"] > 0
    assert all(0.1 < row["ratio"] < 10 for row in fit["held_out"])
    for row in fit["held_out"]:
        assert row["ratio"] == pytest.approx(row["measured_s"] / row["predicted_s"])
    assert "calibrated_ratio_to_baseline" in methods["arc"]
    assert "Calibrated model" in (tmp_path / "vllm" / "profile.md").read_text()
    # Set beside an earlier run: a profile.json this command wrote on the same model (see PREVIOUS).
    previous, then = result["against_previous"], json.loads(PREVIOUS.read_text())
    assert previous["previous_t_step_s"] == then["calibrated"]["t_step_s"]
    assert previous["t_step_s"] == fit["t_step_s"] and previous["previous_k_mem"] == then["calibrated"]["k_mem"]
    now, before = fit["t_step_s"], then["calibrated"]["t_step_s"]
    assert previous["relative_difference"] == pytest.approx(abs(now - before) / max(now, before, 1e-300))
    assert previous["within_10_percent"] == (previous["relative_difference"] <= 0.10)
    assert previous["previous_load_average"] == then["measurement"]["load_average_before"]
    assert f"Against {PREVIOUS}" in (tmp_path / "vllm" / "profile.md").read_text()


@pytest.mark.slow
@pytest.mark.memory(2)  # the torch engine's process
def test_the_torch_step_profile_has_the_models_shapes(tmp_path):
    result = run_profile(tmp_path / "torch", "--engine", "torch", "--model", str(prepare_tiny()),
                         "--contexts", "128,512", "--batches", "1,2", "--steps", "2")
    assert result["engine"] == "torch" and len(result["decode"]) == 4
    model = result["model"]
    assert result["kv_bytes"]["torch_weight_bytes"] == pytest.approx(model["parameters"] * 2, rel=0.05)
    assert "not measured" in result["traffic"]["reason"]
    # The calibrated fit runs on this engine too (bench/gpu_check.sh's path on a GPU).
    calibrated = result["calibrated"]
    assert len(calibrated["held_out"]) == 2
    assert calibrated["t_step_s"] + calibrated["k_mem"] + calibrated["k_flop"] > 0
    assert all(row["predicted_s"] > 0 and row["ratio"] == pytest.approx(row["measured_s"] / row["predicted_s"])
               for row in calibrated["held_out"])
    assert {"context", "batch", "measured_s", "predicted_s"} <= set(calibrated["held_out"][0])


def test_a_trace_with_the_torch_engine_is_refused_before_anything_is_measured(monkeypatch):
    from arc_vllm.cost import profile as profiling

    monkeypatch.setattr(profiling, "calibrate", lambda device: pytest.fail("measured before refusing"))
    with pytest.raises(profiling.ProfileError, match="--trace needs the vLLM engine"):
        profiling.profile(engine="torch", trace="results.jsonl")
