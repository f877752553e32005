"""ArcConfig validation: the parts after F fit in L, and clear errors naming what is wrong."""

import pytest

from arc_vllm.core.config import ArcConfig


def test_default_config_is_within_its_window():
    from arc_vllm.core.config import DEFAULT_MAX_TOKENS

    config = ArcConfig()
    assert config.minimum_tokens <= config.input_budget_tokens
    assert config.input_budget_tokens == config.context_window - config.max_tokens
    # G_max has one default: the field's is the one a window is split with, and the one served.
    assert config.max_tokens == ArcConfig.for_window(8192).max_tokens == DEFAULT_MAX_TOKENS


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


def test_the_serve_flags_and_the_cli_options_are_arcconfigs_fields_with_one_help_and_default():
    """One table (``ArcConfig.options``): ``serve``'s ``--arc-NAME`` budgets and the CLI's
    ``--NAME`` carry the same help, whose "unset" is what a server's session gets when the flag
    is not given; G_max unset is ``DEFAULT_MAX_TOKENS`` everywhere."""
    import argparse

    from arc_vllm.cli import _add_budget_options
    from arc_vllm.core.config import DEFAULT_MAX_TOKENS
    from arc_vllm.serving.plugin import add_arc_arguments
    from arc_vllm.serving.sessions.manager import SessionManager

    serve, cli = argparse.ArgumentParser(), argparse.ArgumentParser()
    add_arc_arguments(serve)
    _add_budget_options(cli)
    helps = {action.dest: action.help for parser in (serve, cli) for action in parser._actions}
    options = ArcConfig.options()
    assert set(options) >= {"max_tokens", "answer_room_percent", "recalls_per_step", "recent_turns"}
    for name, text in options.items():
        assert helps[f"arc_{name}"] == helps[name] == text
    assert cli.parse_args([]).max_tokens == DEFAULT_MAX_TOKENS
    served = SessionManager(object(), 8192, {}).config({})
    assert served == ArcConfig.for_window(8192) and served.max_tokens == DEFAULT_MAX_TOKENS
    for name, text in options.items():
        unset = text.rsplit("(unset: ", 1)[1].rstrip(")")
        if not unset.startswith("from the window"):
            assert str(getattr(served, name)) == unset, name
        else:
            assert unset.endswith(f"{getattr(served, name)} at 8192 tokens"), name


@pytest.mark.parametrize("options, named", [({"min_run": 0}, "min_run"), ({"host_tokens": -5}, "host_tokens"),
                                            ({"max_moves": -1}, "max_moves"), ({"min_gain": "many"}, "min_gain"),
                                            ({"min_run": True}, "min_run"), ({"min_rnu": 16}, "min_rnu")])
def test_kv_reuse_options_are_checked_by_name(options, named):
    """``KVReuseConfig`` refuses at construction, naming the option, a value the connector
    cannot run with and an option it does not know (a misspelt one was ignored)."""
    from arc_vllm.kv.config import KVReuseConfig

    with pytest.raises(ValueError, match=named):
        KVReuseConfig.of_extra(options)
    assert KVReuseConfig.of_extra({"min_run": 8.0, "layout": "x", "is_neox": False}).min_run == 8
