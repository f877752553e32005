"""The roofline model against a cell worked out by hand from the paper's equations."""

import math

import pytest

from arc_vllm.cost.roofline import Call, Hardware, Model, compare, roofline


def test_one_cell_by_hand():
    # Qwen3-8B on an H200, two calls, one success, no scratch.
    weights = 8.19e9 * 2                                   # M_w, bytes
    kv = 2 * 36 * 8 * 128 * 2                              # kv_b = 147,456 bytes per token
    contexts = [1000 + 100 / 2, 3000 + 100 / 2]            # L_k = p_k + m_k / 2
    batch = math.floor((141e9 - weights) / (sum(contexts) / 2 * kv))
    assert batch == 412
    decode = sum(100 * (weights / batch + context * kv) for context in contexts)
    flops = sum(2 * 8.19e9 * p + 2 * 36 * p * p * 32 * 128 for p in (1000, 3000))
    row = roofline([Call(1000, 100), Call(3000, 100)], 1, Model.named("Qwen3-8B"),
                   Hardware.named("H200"))
    assert row["batch_size"] == batch
    assert row["decode_bytes"] == pytest.approx(decode)
    assert row["decode_s"] == pytest.approx(decode / 4.8e12)
    assert row["prefill_s"] == pytest.approx(flops / 989e12)
    assert row["total_s_per_success"] == pytest.approx(decode / 4.8e12 + flops / 989e12)


def test_shorter_contexts_save_traffic_and_raise_the_batch():
    model, hardware = Model.named("Qwen3-32B"), Hardware.named("MI300X")
    long = roofline([Call(30000, 500)] * 10, 5, model, hardware)
    short = roofline([Call(6000, 500)] * 10, 5, model, hardware)
    table = compare({"window": long, "arc": short}, "window")
    assert short["batch_size"] > long["batch_size"]
    assert table["arc"]["savings_pct"] > 0 and table["arc"]["speedup"] > 1
    assert table["window"]["savings_pct"] == 0 and table["window"]["speedup"] == 1


def test_unknown_names_are_clear():
    with pytest.raises(ValueError, match="unknown hardware"):
        Hardware.named("TPU")
    with pytest.raises(ValueError, match="unknown model"):
        Model.named("gpt-9")
    with pytest.raises(ValueError, match="baseline"):
        compare({"arc": roofline([], 0, Model.named("Qwen3-8B"), Hardware.named("H100"))}, "window")
