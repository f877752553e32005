"""ArcConfig validation: K <= L, and clear errors naming what is wrong."""

import pytest

from arc_vllm.core.config import ArcConfig


def test_default_config_is_within_its_window():
    config = ArcConfig()
    assert config.view_budget_tokens <= config.input_budget_tokens
    assert config.input_budget_tokens == config.context_window - config.max_tokens


def test_k_over_l_names_the_components():
    with pytest.raises(ValueError) as error:
        ArcConfig(context_window=8192, max_tokens=1024)
    message = str(error.value)
    assert "K = B+M+R+P+Q+eta" in message and "exceeds L" in message
    for component in ("prefix", "summary", "recent", "catalog", "recall", "overhead"):
        assert component in message


@pytest.mark.parametrize("field, value", [("context_window", -1), ("recalls_per_step", 0),
                                          ("recall_chunk_tokens", 2), ("max_tokens", "big"),
                                          ("recent_turns", True)])
def test_bad_values_are_refused(field, value):
    with pytest.raises(ValueError, match=field):
        ArcConfig(**{field: value})


def test_chunk_must_fit_recall_budget():
    with pytest.raises(ValueError, match="recall_chunk_tokens"):
        ArcConfig(recall_chunk_tokens=3072)


def test_for_window_scales_to_small_windows():
    config = ArcConfig.for_window(4096, 512)
    assert config.view_budget_tokens <= config.input_budget_tokens
    assert config.stubs_per_page >= 1
    with pytest.raises(ValueError, match="too small"):
        ArcConfig.for_window(1024, 512)
