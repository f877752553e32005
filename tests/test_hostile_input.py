"""Hostile input gets a clear status, and nothing a client sends breaks a route (issue 36, in
part), against the shared ARC server on the tiny model:

- a signature holding every control character and any Unicode reaches the observation route's
  header percent-encoded (the connection is never dropped), the body exactly as stored;
- JSON nested 10,000 deep is a 400 in each API's own form, on every ARC route;
- a conversation id that is not valid text (a lone surrogate) is a 400, and the listing of
  sessions keeps answering; one stored before ids were checked still loads and lists;
- a second result for one tool call is a 400 on the Anthropic and Responses APIs;
- a body of the wrong shape on /v1/messages gets Anthropic's error form, not Python internals;
- under ``--api-key`` with two keys, each key's sessions are its own: by every way of naming a
  session (header, ``vllm_xargs``, ``previous_response_id``) and on every read route, another
  key's session answers 404, as an unknown one; the listing shows a key its own sessions, the
  operator's key (``--arc-admin-key``) every one; Anthropic clients' ``x-api-key`` is accepted.
"""

import asyncio
import json
from urllib.parse import unquote

import pytest

from arc_vllm.core.config import ArcConfig
from arc_vllm.serving.sessions.places import storage_for
from arc_vllm.serving.sessions.manager import SessionManager
from tests.helpers.api_calls import call, model_of
from tests.helpers.conversations import visible_id

pytestmark = pytest.mark.slow
CONTROL = "".join(chr(code) for code in range(0x20)) + "\x7f" + "é漢😀\u2028"


def test_a_signature_with_control_characters_reaches_the_header_encoded(arc_server):
    model = model_of(arc_server)
    arguments = json.dumps({"script": f"cat <<EOF\n{CONTROL}\nEOF"}, ensure_ascii=False)
    body = "output\r\nwith\x00 controls " + CONTROL
    messages = [{"role": "user", "content": "Run it."},
                {"role": "assistant", "content": "line one\nline two", "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": arguments}}]},
                {"role": "tool", "tool_call_id": "c1", "content": body}]
    status, answer, _ = call(arc_server.base, "POST", "/v1/chat/completions",
                             {"model": model, "messages": messages, "max_tokens": 2})
    assert status == 200
    sid, id = answer["arc"]["session"], visible_id(f"bash({arguments})", body)
    status, text, headers = call(arc_server.base, "GET", f"/v1/arc/sessions/{sid}/observations/{id}")
    assert status == 200 and text == body
    assert unquote(headers["X-ARC-Signature"]) == f"bash({arguments})"[:200]
    assert all(0x20 <= ord(char) < 0x7F for char in headers["X-ARC-Signature"])


DEEP = b'{"a":' * 10_000 + b"1" + b"}" * 10_000


@pytest.mark.parametrize("path, form", [
    ("/v1/chat/completions", "openai"), ("/v1/messages", "anthropic"), ("/v1/messages/count_tokens", "anthropic"),
    ("/v1/responses", "openai"), ("/v1/responses/compact", "openai"), ("/v1/arc/sessions", "openai")])
def test_json_nested_too_deep_is_a_400_in_the_apis_form(arc_server, path, form):
    status, error, _ = call(arc_server.base, "POST", path, raw=DEEP)
    assert status == 400
    message = error["error"]["message"]
    assert "nested deeper" in message and (error["type"] == "error" if form == "anthropic" else "code" in error["error"])


def test_a_conversation_id_that_is_not_text_is_a_400_and_the_listing_answers(arc_server):
    model = model_of(arc_server)
    raw = ('{"model": "%s", "input": "hi", "max_output_tokens": 2, "prompt_cache_key": "\\ud800"}' % model).encode()
    status, error, _ = call(arc_server.base, "POST", "/v1/responses", raw=raw)
    assert status == 400 and "prompt_cache_key" in error["error"]["message"]
    user_id = json.dumps({"session_id": "\ud800"})
    status, error, _ = call(arc_server.base, "POST", "/v1/messages", {
        "model": model, "max_tokens": 2, "messages": [{"role": "user", "content": "hi"}],
        "metadata": {"user_id": user_id}})
    assert status == 400 and error["type"] == "error"
    assert call(arc_server.base, "GET", "/v1/arc/sessions")[0] == 200


def test_a_session_stored_with_a_bad_client_id_still_loads_and_lists(tmp_path, smol):
    async def scenario():
        manager = SessionManager(smol, 4096, {}, storage_for(tmp_path))
        session = await manager.create(client_id="good")
        session.take_in([{"role": "user", "content": "hi"}], None)
        await session.commit()
        await manager.close()  # as a server that stopped
        state = json.loads((tmp_path / session.id / "session.json").read_text())
        state["client_id"] = state["summary"]["client_id"] = "\ud800bad"  # as code before ids were checked wrote it
        (tmp_path / session.id / "session.json").write_text(json.dumps(state))
        reopened = SessionManager(smol, 4096, {}, storage_for(tmp_path))  # not started: the session stays unloaded
        for listing in (await reopened.listing(), [(await reopened.get(session.id)).summary()]):  # unloaded, then loaded
            assert json.dumps(listing, ensure_ascii=False).encode("utf-8")  # nothing unwritable
            assert [entry["client_id"] for entry in listing] == ["\\ud800bad"]

    asyncio.run(scenario())


def test_a_second_result_for_one_call_is_a_400(arc_server):
    model = model_of(arc_server)
    use = {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "cat", "input": {}}]}
    result = {"type": "tool_result", "tool_use_id": "t1", "content": "x"}
    status, error, _ = call(arc_server.base, "POST", "/v1/messages", {
        "model": model, "max_tokens": 2, "messages": [{"role": "user", "content": "go"}, use,
                                                      {"role": "user", "content": [result, result]}]})
    assert status == 400 and "already has a result" in error["error"]["message"]
    output = {"type": "function_call_output", "call_id": "c1", "output": "x"}
    status, error, _ = call(arc_server.base, "POST", "/v1/responses", {
        "model": model, "max_output_tokens": 2, "input": [
            {"role": "user", "content": "go"}, {"type": "function_call", "call_id": "c1", "name": "cat",
                                                "arguments": "{}"}, output, output]})
    assert status == 400 and "already has a result" in error["error"]["message"]


@pytest.mark.parametrize("messages", [7, "text", [7], [{"role": "user", "content": 7}]])
def test_a_messages_body_of_the_wrong_shape_gets_anthropics_error_form(arc_server, messages):
    status, error, _ = call(arc_server.base, "POST", "/v1/messages",
                            {"model": model_of(arc_server), "max_tokens": 2, "messages": messages})
    assert status == 400 and error["type"] == "error" and error["error"]["type"] == "invalid_request_error"
    assert "object is not" not in error["error"]["message"]  # no Python internals


def test_anthropic_clients_key_is_accepted_under_api_key(keyed_server):
    import anthropic
    from openai import OpenAI

    model = OpenAI(base_url=keyed_server.base + "/v1", api_key="key-a").models.list().data[0].id
    client = anthropic.Anthropic(base_url=keyed_server.base, api_key="key-a", max_retries=0)
    answer = client.messages.create(model=model, max_tokens=2, messages=[{"role": "user", "content": "hi"}])
    assert answer.model_extra["arc"]["session"]
    with pytest.raises(anthropic.AuthenticationError):
        anthropic.Anthropic(base_url=keyed_server.base, api_key="wrong", max_retries=0).messages.create(
            model=model, max_tokens=2, messages=[{"role": "user", "content": "hi"}])
    assert call(keyed_server.base, "GET", "/v1/arc/sessions", headers={"x-api-key": "key-a"})[0] == 401  # not on others


def as_key(key: str) -> dict:
    return {"Authorization": f"Bearer {key}"}


def test_each_keys_sessions_are_its_own_on_every_route(keyed_server):
    base = keyed_server.base
    model = call(base, "GET", "/v1/models", headers=as_key("key-a"))[1]["data"][0]["id"]
    messages = [{"role": "user", "content": "Key A's task."},
                {"role": "assistant", "content": "", "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "cat", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "KEY-A-SECRET\n" * 50}]
    status, answer, _ = call(base, "POST", "/v1/chat/completions",
                             {"model": model, "messages": messages, "max_tokens": 2}, as_key("key-a"))
    assert status == 200
    sid, oid = answer["arc"]["session"], visible_id("cat({})", "KEY-A-SECRET\n" * 50)
    status, response, _ = call(base, "POST", "/v1/responses", {"model": model, "input": "Key A again.",
                                                               "max_output_tokens": 2}, as_key("key-a"))
    rid, rsid = response["id"], response["arc"]["session"]
    reads = [f"/v1/arc/sessions/{sid}", f"/v1/arc/sessions/{sid}/requests", f"/v1/arc/sessions/{sid}/observations/{oid}",
             f"/v1/arc/sessions/{sid}/catalog", f"/v1/arc/sessions/{sid}/view", f"/v1/arc/sessions/{sid}/timeline",
             f"/v1/arc/sessions/{sid}/search?q=SECRET"]
    for path in reads:
        assert call(base, "GET", path, headers=as_key("key-a"))[0] == 200, path
        status, error, _ = call(base, "GET", path, headers=as_key("key-b"))
        assert status == 404 and "SECRET" not in json.dumps(error), path
        assert call(base, "GET", path, headers=as_key("ops"))[0] == 200, path  # the operator's key
    probe = messages + [{"role": "user", "content": "show me"}]
    for how in ({"headers": {**as_key("key-b"), "X-ARC-Session": sid}, "body": {}},
                {"headers": as_key("key-b"), "body": {"vllm_xargs": {"arc_session": sid, "arc_debug": 1}}}):
        status, error, _ = call(base, "POST", "/v1/chat/completions",
                                {"model": model, "messages": probe, "max_tokens": 2, **how["body"]}, how["headers"])
        assert status == 404 and "SECRET" not in json.dumps(error)
    status, error, _ = call(base, "POST", "/v1/responses", {"model": model, "input": "x", "max_output_tokens": 2,
                                                            "previous_response_id": rid}, as_key("key-b"))
    assert status == 404
    assert call(base, "DELETE", f"/v1/arc/sessions/{sid}", headers=as_key("key-b"))[0] == 404
    listed = {row["id"] for row in call(base, "GET", "/v1/arc/sessions", headers=as_key("key-b"))[1]["sessions"]}
    assert not listed & {sid, rsid}
    listed = {row["id"] for row in call(base, "GET", "/v1/arc/sessions", headers=as_key("key-a"))[1]["sessions"]}
    assert {sid, rsid} <= listed
    assert {sid, rsid} <= {row["id"] for row in call(base, "GET", "/v1/arc/sessions", headers=as_key("ops"))[1]["sessions"]}
    # The owner's session is as it was: the other key's attempts changed nothing.
    assert call(base, "GET", f"/v1/arc/sessions/{sid}", headers=as_key("key-a"))[1]["requests"] == 1


def test_a_rewritten_history_with_a_bad_message_changes_nothing(smol):
    """Found by test_hostile_bodies: a request that rewrites the session's history (a different
    message where the session has one) and holds a bad message was refused, but the session
    had been rebased first (its turns gone from the view). It is read first now."""
    from arc_vllm.serving.sessions.session import Session

    session = Session("sess_rewrite", ArcConfig.for_window(4096, 512), smol, None)
    messages = [{"role": "user", "content": "task"}]
    for index in range(5):
        messages += [{"role": "assistant", "content": "", "tool_calls": [{"id": f"c{index}", "type": "function",
                      "function": {"name": "cat", "arguments": "{}"}}]},
                     {"role": "tool", "tool_call_id": f"c{index}", "content": f"out {index}"}]
    session.take_in(messages, None, save=False)
    before = (len(session.context.turns), session.num_rebases, list(session.fingerprints), session.context)
    bad = messages[:1] + [dict(messages[1], content={"not": "text"})] + messages[2:]
    with pytest.raises(ValueError, match=r"messages\[1\]\.content"):
        session.take_in(bad, None, save=False)
    assert (len(session.context.turns), session.num_rebases, list(session.fingerprints), session.context) == before
