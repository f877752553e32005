"""`arc-vllm serve` arguments: ARC's own, the model, and everything else left for vLLM."""

import pytest

from arc_vllm.serving.launcher import split_arguments


def test_arc_options_model_and_vllm_options_are_separated():
    arc, model, rest = split_arguments(["my-model", "--arc-store-dir", "/tmp/s", "--arc-recent-turns",
                                        "3", "--port", "9000", "--enforce-eager"])
    assert model == "my-model" and rest == ["--port", "9000", "--enforce-eager"]
    assert arc == {"budgets": {"recent_turns": 3}, "store_dir": "/tmp/s"}
    arc, model, rest = split_arguments(["--max-model-len", "4096"])
    assert model is None and rest == ["--max-model-len", "4096"] and arc["store_dir"] is None


def test_unknown_arc_options_are_refused_by_name():
    with pytest.raises(SystemExit, match="--arc-bogus"):
        split_arguments(["--arc-bogus", "1"])
