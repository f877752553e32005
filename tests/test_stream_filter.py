"""Streaming ARC answers hold back only what may be an ARC command (``serving/step/stream_filter.py``).

Over many random outputs split into random deltas (hypothesis): an output with no command is
released whole and in order, whatever the split; one with a command never shows the command
line nor anything after it, and shows every line before it; ARC tool calls never reach the
client, the client's do, renumbered from 0.

    pytest tests/test_stream_filter.py
"""

from hypothesis import given
from hypothesis import strategies as st

from arc_vllm.core.commands import parse_commands
from arc_vllm.serving.step.stream_filter import HeldBack, may_become_command

LINES = st.sampled_from(["Let me look.", "the answer is 42", "_recall §1f3a9c0d", "`_recall §abc 2`",
                         "_catalog next", "  _recall_meta §0a", "_recall", "_rec", "_recalled it",
                         "__init__ done", "`code`", "", "   ", "_catalogue of things", "x_recall §1"])


@st.composite
def outputs(draw):
    lines = draw(st.lists(LINES, min_size=1, max_size=6))
    text = "\n".join(lines) + draw(st.sampled_from(["", "\n"]))
    cuts = sorted(draw(st.lists(st.integers(0, len(text)), max_size=8)))
    pieces = [text[a:b] for a, b in zip([0] + cuts, cuts + [len(text)])]
    return text, pieces


def stream(pieces, commands=True):
    held = HeldBack(commands=commands)
    shown = []
    for piece in pieces:
        out, _ = held.feed({"content": piece})
        shown.append(out.get("content", ""))
    return held, "".join(shown)


@given(outputs())
def test_text_without_a_command_is_released_whole_and_in_order(case):
    text, pieces = case
    held, shown = stream(pieces)
    if parse_commands(text):
        lines = text.split("\n")
        first = next(i for i, line in enumerate(lines) if parse_commands(line))
        before = "\n".join(lines[:first]) + ("\n" if first else "")
        assert shown == before[:len(shown)] and not parse_commands(shown)
        # Every complete line before the command was released by the end of the stream.
        assert shown == before or may_become_command(before[len(shown):].split("\n")[0])
    else:
        assert shown + held.finish().get("content", "") == text


@given(outputs())
def test_the_last_allowed_generation_passes_text_at_once(case):
    text, pieces = case
    _, shown = stream(pieces, commands=False)
    assert shown == text


def test_a_normal_line_is_not_held_and_a_command_prefix_is():
    held = HeldBack()
    assert held.feed({"content": "Hello"})[0] == {"content": "Hello"}
    assert held.feed({"content": "\n_rec"})[0] == {"content": "\n"}
    assert held.feed({"content": "ord"})[0] == {"content": "_record"}  # can no longer be one
    assert held.feed({"content": "\n `_reca"})[0] == {"content": "\n"}
    assert held.feed({"content": "lled`\n"})[0] == {"content": " `_recalled`\n"}  # not a command line
    assert held.feed({"content": "_recall §ab\nafter"})[0] == {}
    assert held.stopped


def call(index, name=None, arguments=None, id=None):
    piece = {"index": index, "function": {}}
    if name:
        piece.update(id=id or f"c{index}", type="function")
        piece["function"]["name"] = name
    if arguments is not None:
        piece["function"]["arguments"] = arguments
    return piece


def test_arc_tool_calls_are_dropped_and_the_clients_renumbered():
    held = HeldBack(commands=False)  # the last generation: ARC calls dropped, the rest shown
    shown = []
    for piece in (call(0, "_recall"), call(0, arguments='{"id": "ab"}'), call(1, "cat"),
                  call(1, arguments='{"path": "a"}')):
        shown += held.feed({"tool_calls": [piece]})[0].get("tool_calls", [])
    assert [piece["index"] for piece in shown] == [0, 0]
    assert shown[0]["function"]["name"] == "cat" and shown[1]["function"]["arguments"] == '{"path": "a"}'


def test_after_an_arc_call_nothing_more_is_shown_while_commands_are_served():
    held = HeldBack()
    assert held.feed({"tool_calls": [call(0, "cat")]})[0]["tool_calls"][0]["index"] == 0
    assert held.feed({"tool_calls": [call(1, "_recall_meta")]})[0] == {}
    assert held.feed({"tool_calls": [call(2, "ls")]})[0] == {} and held.stopped


@given(outputs(), st.lists(st.text(max_size=12), min_size=1, max_size=8), st.booleans())
def test_reasoning_deltas_pass_at_once_whatever_the_text_holds(case, thoughts, commands):
    """A reasoning model's thinking streams as it is made: each reasoning delta is released in
    the same delta, unchanged, even while text that may be a command (or an ARC call) is held."""
    text, pieces = case
    held = HeldBack(commands=commands)
    for index, piece in enumerate(pieces):
        thought = thoughts[index % len(thoughts)]
        out, _ = held.feed({"reasoning": thought, "content": piece})
        assert out.get("reasoning") == thought
    out, _ = held.feed({"reasoning": "after", "tool_calls": [{"index": 0, "id": "c", "function": {"name": "_recall"}}]})
    assert out == {"reasoning": "after"}
