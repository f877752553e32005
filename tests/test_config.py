"""ArcConfig validation: the parts after F fit in L, and clear errors naming what is wrong."""

import pytest

from arc_vllm.core.config import ArcConfig


def test_default_config_is_within_its_window():
    config = ArcConfig()
    assert config.minimum_tokens <= config.input_budget_tokens
    assert config.input_budget_tokens == config.context_window - config.max_tokens


def test_a_minimum_over_l_names_the_components():
    # The parts in their smallest form (about 700 tokens) cannot fit in L = 512.
    with pytest.raises(ValueError) as error:
        ArcConfig(context_window=1024, max_tokens=512)
    message = str(error.value)
    assert "need at least" in message and "over L" in message
    for component in ("eta", "newest turn", "catalog page", "recall chunk", "summary"):
        assert component in message


def test_budgets_are_caps_split_from_what_f_leaves():
    from arc_vllm.core.budget import Budgets

    config = ArcConfig.for_window(4096, 512)
    small, large = Budgets.for_prefix(config, 200), Budgets.for_prefix(config, 1500)
    assert small.summary == config.summary_budget_tokens and small.recall == config.recall_budget_tokens
    assert small.recent >= config.recent_budget_tokens
    for budgets in (small, large):
        assert (budgets.prefix + config.overhead_tokens + budgets.summary + budgets.recent
                + budgets.catalog + budgets.recall) == config.input_budget_tokens
        assert budgets.recent >= config.minimum_recent_tokens
        assert budgets.recall >= config.recall_chunk_tokens + 32


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
    assert config.minimum_tokens <= config.input_budget_tokens
    assert config.stubs_per_page >= 1
    with pytest.raises(ValueError, match="too small"):
        ArcConfig.for_window(1024, 512)
