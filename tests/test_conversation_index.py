"""Implicit sessions' index (``serving/conversation_index.py``) and the Ray front's routing key
for a request that names no session (``serving/ray_serve.session_of``), as properties over
random conversations (hypothesis): a conversation is found from any longer resend of it, by
the same caller only; a diverging history is not; every request of one conversation routes
to one key.

    pytest tests/test_conversation_index.py
"""

import json

from hypothesis import given
from hypothesis import strategies as st

from arc_vllm.core.transcript import fingerprint
from arc_vllm.serving.conversation_index import ConversationIndex, caller_of
from arc_vllm.serving.ray_serve import session_of

MESSAGES = st.lists(st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant", "tool"]),
                                           "content": st.text(max_size=12)}), min_size=1, max_size=8)


@given(MESSAGES, MESSAGES, st.text(max_size=5))
def test_a_conversation_is_found_from_its_resends_by_its_caller_only(recorded, more, key):
    index = ConversationIndex()
    caller = caller_of(f"Bearer {key}", None)
    index.remember("sess_a", caller, [fingerprint(message) for message in recorded])
    assert index.find(caller, recorded + more) == "sess_a"
    assert index.find(caller_of(f"Bearer {key}x", None), recorded + more) is None
    assert index.find(caller_of(f"Bearer {key}", "someone"), recorded + more) is None
    edited = [dict(recorded[0], content=recorded[0]["content"] + "!")] + recorded[1:]
    assert index.find(caller, edited + more) is None
    index.remember("sess_a", caller, [fingerprint(message) for message in recorded + more])
    assert index.find(caller, recorded + more) == "sess_a"
    if more:  # the shorter conversation is no longer this session's
        assert index.find(caller, recorded) is None


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
