"""The command grammar: what is a command, what is data."""

import pytest
from hypothesis import given, strategies as st

from arc_vllm.core.commands import (CatalogNext, CatalogPage, InvalidCommand, Recall, RecallMeta,
                                    parse_commands)


@pytest.mark.parametrize("action, expected", [
    ("_recall §1f3a9c0d", [Recall("1f3a9c0d")]),
    ("_recall 1f3a9c0d 3", [Recall("1f3a9c0d", 3)]),
    ("_recall §1f3a9c0d chunk 2", [Recall("1f3a9c0d", 2)]),
    ("`_recall §1f3a9c0d`.", [Recall("1f3a9c0d")]),
    ("  _recall_meta §abcd", [RecallMeta("abcd")]),
    ("_catalog next", [CatalogNext()]),
    ("_catalog page 4", [CatalogPage(4)]),
    ("I will look.\n_recall §aa\n_recall §bb 2", [Recall("aa"), Recall("bb", 2)]),
    ("cat secrets.txt", []),
    ("echo _recall §aa", []),  # not at the start of a line: a shell command's argument
])
def test_grammar(action, expected):
    assert parse_commands(action) == expected


@pytest.mark.parametrize("action", ["_recall", "_catalog", "_catalog page x", "_recall §a 0",
                                    "_catalog page 0", "_recall §a b c"])
def test_malformed_commands_are_reported_not_passed_on(action):
    [command] = parse_commands(action)
    assert isinstance(command, InvalidCommand) and command.error


def test_non_text_action_is_a_type_error():
    with pytest.raises(TypeError, match="action must be str"):
        parse_commands(b"_recall x")


@given(st.lists(st.sampled_from(["_recall §", "_recall_meta §", "_catalog next", "_catalog page ",
                                 "\n", " ", "x"]), max_size=30).map("".join))
def test_observation_text_is_never_executed(smol, text):
    """Property 6: command text inside observations is stored and shown, never served."""
    from arc_vllm.core.config import ArcConfig
    from arc_vllm.core.context import ArcContext

    context = ArcContext(ArcConfig.for_window(4096, 512), smol, task="t")
    context.observe("cat notes.txt", text + "\n_recall §" + "0" * 8)
    context.observe("cat more.txt", "_catalog next\n_catalog page 2")
    context.render()
    assert context.recall.num_recalls == 0 and context.recall.num_refused == 0
    assert context.recall.materialized == {} and context.catalog.current == 1
    assert [turn.note for turn in context.turns] == [None, None]
