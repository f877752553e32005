"""Implicit sessions' index (``serving/sessions/conversation_index.py``), the wire keys clients send
(``serving/sessions/conversation_keys.py``) and the Ray front's routing key for a request that names no
session (``serving/ray/front.session_of``), as properties over random conversations
(hypothesis): a conversation is found from any longer resend of it, by the same caller only;
a diverging history is not, except under the client's own conversation id with the same first
message (a rewrite); every request of one conversation routes to one key, on every API.

    pytest tests/test_conversation_index.py
"""

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from arc_vllm.core.transcript import fingerprint
from arc_vllm.serving.sessions.conversation_index import ConversationIndex, client_scope
from arc_vllm.serving.metrics import CHAT, MESSAGES as MESSAGES_API, RESPONSES
from arc_vllm.serving.sessions.conversation_keys import caller_of, conversation_of
from arc_vllm.serving.ray.front import session_of
from arc_vllm.serving.errors import SessionError

def prints(messages):
    return [fingerprint(message) for message in messages]


MESSAGES = st.lists(st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant", "tool"]),
                                           "content": st.text(max_size=12)}), min_size=1, max_size=8)


@given(MESSAGES, MESSAGES, st.text(max_size=5))
def test_a_conversation_is_found_from_its_resends_by_its_caller_only(recorded, more, key):
    index = ConversationIndex()
    caller = caller_of({"authorization": f"Bearer {key}"}, None)
    index.remember("sess_a", caller, [fingerprint(message) for message in recorded])
    assert index.find(caller, prints(recorded + more)) == "sess_a"
    assert index.find(caller_of({"authorization": f"Bearer {key}x"}, None), prints(recorded + more)) is None
    assert index.find(caller_of({"authorization": f"Bearer {key}"}, {"user": "someone"}), prints(recorded + more)) is None
    assert index.find(caller_of({"x-api-key": f"Bearer {key}x"}, None), prints(recorded + more)) is None
    edited = [dict(recorded[0], content=recorded[0]["content"] + "!")] + recorded[1:]
    assert index.find(caller, prints(edited + more)) is None
    index.remember("sess_a", caller, [fingerprint(message) for message in recorded + more])
    assert index.find(caller, prints(recorded + more)) == "sess_a"
    if more:  # the shorter conversation is no longer this session's
        assert index.find(caller, prints(recorded)) is None


@given(MESSAGES, MESSAGES)
def test_every_request_of_one_conversation_routes_to_one_key(first, more):
    headers = {"authorization": "Bearer k"}

    def key(messages, **extra):
        return session_of("/v1/chat/completions", headers, json.dumps({"messages": messages, **extra}).encode())

    assert key(first) == key(first + more) and key(first).startswith("conversation-")
    assert key(first, user="other") != key(first)
    named = {"messages": first, "vllm_xargs": {"arc_session": "sess_x"}}
    assert session_of("/v1/chat/completions", headers, json.dumps(named).encode()) == "sess_x"
    assert session_of("/v1/chat/completions", {"x-arc-session": "sess_y"}, json.dumps({"messages": first}).encode()) == "sess_y"


@given(MESSAGES, MESSAGES, st.text(min_size=1, max_size=8))
def test_under_the_clients_own_id_a_rewritten_history_finds_its_session(recorded, other, conversation):
    """Claude Code's /compact keeps its session id and its system prompt and rewrites the
    rest: the same session. Another first message under the id is another conversation (a side
    request); the id never reaches across callers or out of its scope."""
    index = ConversationIndex()
    caller = caller_of({"x-api-key": "k"}, None)
    scope = client_scope(caller, conversation)
    index.remember("sess_a", scope, [fingerprint(message) for message in recorded])
    rewritten = recorded[:1] + [dict(message, content=message["content"] + "!") for message in other]
    assert index.find_rewritten(scope, prints(rewritten)) == "sess_a"
    assert index.find(caller, prints(recorded)) is None and index.find_rewritten(caller, prints(rewritten)) is None
    assert index.find_rewritten(client_scope(caller_of({"x-api-key": "j"}, None), conversation), prints(rewritten)) is None
    elsewhere = [dict(recorded[0], content=recorded[0]["content"] + "?")] + recorded[1:]
    assert index.find_rewritten(scope, prints(elsewhere)) is None
    index.forget("sess_a")
    assert index.find(scope, prints(recorded)) is None and index.find_rewritten(scope, prints(recorded)) is None and len(index) == 0


def test_each_api_names_its_conversation_where_its_clients_do():
    claude = {"x-claude-code-session-id": "17557aab"}
    user_id = json.dumps({"device_id": "d", "account_uuid": "", "session_id": "17557aab"})
    assert conversation_of(MESSAGES_API, claude, {}) == "17557aab"
    assert conversation_of(MESSAGES_API, {}, {"metadata": {"user_id": user_id}}) == "17557aab"
    assert conversation_of(MESSAGES_API, {}, {"metadata": {"user_id": "user_42"}}) is None  # a person
    assert conversation_of(RESPONSES, {"session-id": "t2"}, {"prompt_cache_key": "t1"}) == "t1"
    assert conversation_of(RESPONSES, {"session-id": "t2"}, {}) == "t2"
    assert conversation_of(CHAT, {"x-session-id": "v"}, {}) == "v"  # vLLM's own session identity
    assert conversation_of(CHAT, {}, {"prompt_cache_key": "app-wide"}) is None  # a cache hint there
    assert conversation_of(CHAT, {}, {"vllm_xargs": {"session_id": "x"}}) == "x"
    assert conversation_of(CHAT, {}, {"user": "u", "safety_identifier": "s"}) is None
    with pytest.raises(SessionError, match="at most 512"):  # too long for an id: a 400, not ignored
        conversation_of(RESPONSES, {}, {"prompt_cache_key": "k" * 600})
    # user and safety_identifier scope the caller: never the same caller
    assert len({caller_of({}, {"user": "u"}), caller_of({}, {"safety_identifier": "u"}), caller_of({}, {})}) == 3


@given(MESSAGES, MESSAGES)
def test_every_request_of_a_conversation_routes_to_one_key_on_every_api(first, more):
    headers = {"x-api-key": "k"}

    def key(path, **body):
        return session_of(path, headers, json.dumps(body).encode())

    marked = [dict(message, content=[{"type": "text", "text": message["content"], "cache_control": {"type": "ephemeral"}}])
              for message in first]
    plain = [dict(message, content=[{"type": "text", "text": message["content"]}]) for message in first]
    # Claude Code moves its cache_control marks from turn to turn: one key all the same.
    assert key("/v1/messages", system="s", messages=marked) == key("/v1/messages", system="s", messages=plain + more)
    assert key("/v1/responses", input=first) == key("/v1/responses", input=first + more)
    assert key("/v1/responses", input=first, prompt_cache_key="t") == key("/v1/responses", input=more or first, prompt_cache_key="t")
    assert key("/v1/responses", input=more, previous_response_id="resp_sess_0a1b_3_ff") == "sess_0a1b"
    assert key("/v1/messages", messages=first) != key("/v1/messages", messages=first, metadata={"user_id": json.dumps({"session_id": "c"})})


@given(MESSAGES, MESSAGES, st.integers(min_value=1, max_value=4))
def test_a_request_in_flight_is_found_by_its_conversation_until_released(recorded, more, holders):
    """Requests of one conversation that arrive before the first has finished (20 at once, or
    the next step the moment the client dropped a stream) find the first one's session: the
    conversation is held from routing to the end of each request. Released, only the
    conversation as the last request left it is indexed again; a shared file keeps the same,
    and a hold of a process that died ends with its time."""
    index = ConversationIndex()
    caller = caller_of({"authorization": "Bearer k"}, None)
    keys = [index.hold("sess_a", caller, prints(recorded)) for _ in range(holders)]
    assert index.find(caller, prints(recorded)) == "sess_a"
    assert index.find(caller, prints(recorded + more)) == "sess_a"  # the next step, sent at once
    scope = client_scope(caller, "thread")
    index.hold("sess_b", scope, prints(recorded))
    assert index.find_rewritten(scope, prints(recorded[:1] + more)) == "sess_b"  # same id, same start
    shared = ConversationIndex.from_state(json.loads(json.dumps(index.state(now=0.0))), now=0.0)
    assert shared.find(caller, prints(recorded + more)) == "sess_a"
    for key in keys:
        index.release(key)
    assert index.find(caller, prints(recorded)) is None  # nothing remembered: nothing found
    index.remember("sess_a", caller, prints(recorded + more))
    assert index.find(caller, prints(recorded + more)) == "sess_a"
    dead = ConversationIndex()
    dead.hold("sess_c", caller, prints(recorded), until=10.0)
    assert ConversationIndex.from_state(dead.state(now=0.0), now=11.0).find(caller, prints(recorded)) is None


@given(st.lists(st.tuples(st.sampled_from(["extend", "resend", "edit", "shorten", "other"]), MESSAGES),
                min_size=1, max_size=12), st.integers(1, 3))
def test_seen_conversations_fingerprint_and_chain_as_a_whole_pass_would(requests, max_conversations):
    """``SeenConversations`` (a resent conversation fingerprinted only past what was seen):
    over random sequences of requests (a conversation extended, resent, edited, cut short, or
    another one), its fingerprints and chained keys are those computed from scratch, for
    every request, under a bound of 1 to 3 conversations kept; another caller's entry is
    never the one consulted."""
    from arc_vllm.serving.sessions.conversation_index import chain
    from arc_vllm.serving.sessions.seen_conversations import SeenConversations

    seen = SeenConversations(max_conversations=max_conversations)
    conversation = []
    for action, messages in requests:
        if action == "extend" or not conversation:
            conversation = conversation + messages
        elif action == "edit":
            conversation = conversation[:-1] + messages
        elif action == "shorten":
            conversation = conversation[:max(1, len(conversation) // 2)]
        elif action == "other":
            conversation = messages
        sent = json.loads(json.dumps(conversation))  # as a client resends it: equal, not the same objects
        for caller in ("a", "b"):
            got = seen.prints(sent, caller, size=len(json.dumps(sent)))
            assert got == prints(sent)
            assert seen.keys(caller, got) == chain(caller, got)
        assert len(seen.prints_of) <= max_conversations and len(seen.keys_of) <= max_conversations
