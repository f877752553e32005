"""The command grammar: what is a command, what is data."""

import json

import pytest
from hypothesis import given, strategies as st

from arc_vllm.core.commands import (CatalogNext, CatalogPage, InvalidCommand, Recall, RecallMeta,
                                    parse_commands, parse_line)


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


@pytest.mark.parametrize("name, arguments, reason", [
    ("_recall", "{not json", "arguments must be a JSON object"),
    ("_recall", "[1, 2]", "arguments must be a JSON object"),
    ("_recall", "{}", "id must be a §id string"),
    ("_recall", '{"id": 7}', "id must be a §id string"),
    ("_recall", '{"id": "§abc", "chunk": 0}', "chunk must be an integer >= 1"),
    ("_recall", '{"id": "§abc", "chunk": true}', "chunk must be an integer >= 1"),
    ("_recall_meta", '{"id": ""}', "id must be a §id string"),
    ("_catalog", '{"page": "two"}', "page must be an integer >= 1"),
    ("_catalog", '{"page": 0}', "page must be an integer >= 1"),
])
def test_an_arc_tool_call_with_invalid_arguments_is_an_invalid_command_that_says_why(name, arguments, reason):
    """The model's ``_recall``/``_recall_meta``/``_catalog`` tool calls with arguments that are
    not the schema's become an ``InvalidCommand`` naming the call and what is wrong (served
    to the model as a refusal, never raised), and good ones their command."""
    from arc_vllm.serving.step.tools import command_of_call

    command = command_of_call(name, arguments)
    assert isinstance(command, InvalidCommand) and command.error.startswith(reason) and name in command.text
    assert command_of_call("_recall", '{"id": "§abc", "chunk": 2}') == Recall("abc", 2)
    assert command_of_call("_catalog", "") == CatalogNext() and command_of_call("_catalog", '{"page": 3}') == CatalogPage(3)


@pytest.mark.parametrize("fields", [{"max_tokens": 100}, {"max_completion_tokens": 50}, {},
                                    {"max_tokens": 100, "max_completion_tokens": 50},
                                    {"max_tokens": 100, "max_completion_tokens": None}])
def test_max_completion_tokens_is_read_first_as_vllm_reads_it(fields):
    """The answer's room a chat body asks for: ``max_completion_tokens`` where set, else
    ``max_tokens`` (vLLM's chat handler's order, ``ChatCompletionRequest``'s own reading)."""
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest

    from arc_vllm.serving.step.chat import asked_tokens

    request = ChatCompletionRequest(model="m", messages=[{"role": "user", "content": "x"}], **fields)
    theirs = request.max_completion_tokens if request.max_completion_tokens is not None else request.max_tokens
    assert asked_tokens(fields) == theirs


@given(st.text("0123456789abcdef", min_size=1, max_size=12), st.one_of(st.none(), st.integers(0, 50)),
       st.one_of(st.none(), st.integers(0, 50)))
def test_a_text_command_and_a_tool_call_are_one_grammar(id, chunk, page):
    """The same command written as a line of text and as an ARC tool call is the same command,
    valid or not (``commands.command_of`` checks both)."""
    from arc_vllm.serving.step.tools import command_of_call

    recall_text = parse_line(f"_recall §{id}" + (f" {chunk}" if chunk is not None else ""))
    recall_call = command_of_call("_recall", json.dumps({"id": f"§{id}", "chunk": chunk}))
    catalog_text = parse_line("_catalog next" if page is None else f"_catalog page {page}")
    catalog_call = command_of_call("_catalog", json.dumps({} if page is None else {"page": page}))
    for text, call in ((recall_text, recall_call), (catalog_text, catalog_call)):
        assert type(text) is type(call)
        if isinstance(text, InvalidCommand):
            assert text.error == call.error
        else:
            assert text == call
