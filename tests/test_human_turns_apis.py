"""The user's own words through the server, on every API, streamed and not: random tool loops
with the user speaking at random steps (after the assistant's text, or typed while a tool ran),
against the real server on the tiny model (4,096 tokens) with the session found by the client's
own id. In every view the engine got (``arc_debug``): K <= L, every user message so far
verbatim or by its head and stub line, the newest whole; the ``arc`` object counts them; at
the end every stored text comes back exactly by id. A text-protocol conversation (mini-swe-
agent's) still compacts its observations to stubs, with no user message taken for the human's.
"""

import json

import pytest
from hypothesis import given, settings, strategies as st

from arc_vllm.core.transcript import HUMAN_SIGNATURE

from tests.helpers.api_calls import call, log, model_of, stored_exactly
from tests.helpers.api_conversations import Conversation, arc_of
from tests.helpers.conversations import visible_id
from tests.helpers.human_turns import how_shown

pytestmark = pytest.mark.slow

WORDS = "keep the public API stable and never touch config/prod.yaml; the retry budget is seven".split()


def human_text(number: int, length: int) -> str:
    words = " ".join(WORDS[(number + index) % len(WORDS)] for index in range(length // 5))
    return f"HUMAN-{number}: {words}"


steps = st.lists(st.one_of(
    st.tuples(st.just("tool"), st.integers(20, 160)),
    st.tuples(st.just("said"), st.one_of(st.integers(10, 200), st.integers(200, 2_400))),
    st.tuples(st.just("typed"), st.integers(20, 160), st.integers(10, 600))), min_size=8, max_size=16)


@pytest.mark.parametrize("api", ["chat", "messages", "responses"])
@settings(max_examples=8, deadline=None)
@given(history=steps, streamed=st.lists(st.booleans(), min_size=16, max_size=16))
def test_the_users_words_stay_in_every_view_on_every_api(arc_server, smol, api, history, streamed):
    conversation = Conversation(api, model_of(arc_server))
    humans, stored, sessions, compactions = [], {}, set(), 0
    for index, event in enumerate(history):
        if event[0] == "said":
            text = human_text(len(humans), event[1])
            conversation.said(text)
            humans.append(text)
        else:
            body = log(index, event[1])
            typed = human_text(len(humans), event[2]) if event[0] == "typed" else None
            conversation.tool(index, body, typed)
            stored[visible_id(f'cat({json.dumps({"path": f"log{index}"})})', body)] = body
            if typed:
                humans.append(typed)
        arc = arc_of(arc_server.base, *conversation.request(streamed[index]))
        sessions.add(arc["session"])
        assert arc["view_tokens"] <= arc["budget_tokens"] == 4096 - 512
        for view in arc["views"]:
            assert smol.count_messages(view) <= arc["budget_tokens"]
        view = arc["views"][-1]
        compactions += arc["compactions"]
        for number, text in enumerate(humans):
            shown = how_shown(view, text, visible_id(HUMAN_SIGNATURE, text))
            assert shown == "verbatim" if number == len(humans) - 1 else shown in ("verbatim", "head"), (number, shown)
        if humans:  # (at most 16 short user messages: the most W may take holds them all)
            figures = arc["human_turns"]
            assert figures["verbatim"] + figures["shortened"] == len(humans) and figures["left_out"] == 0
    [sid] = sessions
    if arc["conversation_tokens"] > 2 * arc["budget_tokens"]:
        assert compactions > 0  # ARC had to act, and the user's words held through it
    for text in humans:
        stored[visible_id(HUMAN_SIGNATURE, text)] = text
    assert stored_exactly(arc_server, sid, stored) == len(stored)


def test_a_text_protocol_conversation_still_compacts_to_stubs(arc_server):
    """mini-swe-agent's form on the chat API (no tools): the output in user messages is cited."""
    model = model_of(arc_server)
    messages = [{"role": "system", "content": "You are a helpful assistant that can interact with a computer."},
                {"role": "user", "content": "Fix the failing test."}]
    for index in range(10):
        messages += [{"role": "assistant", "content": f"THOUGHT: read it\n```mswea_bash_command\ncat log{index}\n```"},
                     {"role": "user", "content": f"<returncode>0</returncode>\n<output>\n{log(index)}</output>"}]
    status, answer, _ = call(arc_server.base, "POST", "/v1/chat/completions",
                             {"model": model, "messages": messages, "max_tokens": 2,
                              "vllm_xargs": {"arc_debug": True}})
    assert status == 200
    arc, view = answer["arc"], answer["arc"]["views"][-1]
    assert arc["compactions"] >= 1 and "human_turns" not in arc
    assert any("(_recall §" in (message.get("content") or "") for message in view)


@pytest.mark.parametrize("api", ["chat", "messages", "responses"])
@pytest.mark.parametrize("named", [True, False], ids=["named-session", "implicit-session"])
def test_a_newest_user_message_too_large_to_keep_whole_is_a_400_and_stays_stored(arc_server, api, named):
    """The newest user message is always whole: one that cannot sit beside F and ARC's other
    parts is a 400 in the API's own form. In a named session ARC says why and how large; an
    implicit session's request ARC refuses is handed to plain vLLM, as every one ARC refuses is
    (plain vLLM refuses it too: the conversation is over the window). Either way the message
    is stored, and once the user writes again it is shown by its head and comes back whole."""
    conversation = Conversation(api, model_of(arc_server))
    extra = {}
    if named:
        extra = {"X-ARC-Session": call(arc_server.base, "POST", "/v1/arc/sessions", {})[1]["id"]}
    conversation.tool(0, log(0, 40))
    huge = "HUMAN-huge: " + "please read this all " * 1_500
    conversation.said(huge)
    path, body, headers = conversation.request(False)
    status, answer, _ = call(arc_server.base, "POST", path, body, {**headers, **extra})
    assert status == 400, answer
    message = answer["error"]["message"]
    if named:
        assert "the newest user message (step 2) is" in message and "leaves at most" in message
    else:
        assert "maximum context length" in message
    if api == "messages":
        assert answer["type"] == "error"
    short = "HUMAN-next: a shorter one."
    conversation.items.append({"role": "user", "content": short})
    path, body, headers = conversation.request(False)
    status, answer, _ = call(arc_server.base, "POST", path, body, {**headers, **extra})
    assert status == 200, answer
    view = answer["arc"]["views"][-1]
    huge_id = visible_id(HUMAN_SIGNATURE, huge)
    assert how_shown(view, huge, huge_id) == "head"
    assert how_shown(view, short, visible_id(HUMAN_SIGNATURE, short)) == "verbatim"
    assert stored_exactly(arc_server, answer["arc"]["session"], {huge_id: huge}) == 1
    if named:
        assert answer["arc"]["session"] == extra["X-ARC-Session"]
