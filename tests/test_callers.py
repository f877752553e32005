"""Sessions belong to their caller (issue 36), on the three agent APIs, streamed and not, for
each way callers are told apart:

- ``keys``: two API keys of one server (``--api-key key-a key-b ops``, a store folder);
- ``gateway``: one key held by a gateway that names its callers in ``X-Caller``
  (``--arc-caller-header X-Caller``);
- ``users``: one key, two end users asserted in the body's ``user`` (the Messages API's
  ``metadata.user_id``).

The owner makes a session by each API (a tool observation holding a secret; a Responses
``previous_response_id``; a compaction handle from ``POST /v1/responses/compact``). The other
caller then tries every way of naming it: ``X-ARC-Session`` and ``vllm_xargs.arc_session`` on
every API (streamed too), the ``previous_response_id``, the handle, and (where the other holds
another key or gateway caller) every read route and ``DELETE``: each is the 404 of an unknown
session, with nothing of the secret, and the owner's session is as it was and continues. The
listing shows a caller its own sessions; ``--arc-admin-key`` reads every one; behind the
gateway a request without its header is a 401.

    pytest tests/test_callers.py
"""

import json

import pytest

from tests.helpers.agent_steps import step
from tests.helpers.api_calls import call
from tests.helpers.conversations import visible_id

pytestmark = pytest.mark.slow
SECRET = "OWNER-SECRET-7f3a\n" * 40


def bearer(key: str) -> dict:
    return {"Authorization": f"Bearer {key}"}


# name -> (server fixture, the owner's headers and body fields, the other's, the operator's headers,
#          whether the other is another tenant, who reads: the owner's session routes' headers)
WAYS = {
    "keys": ("keyed_server", (bearer("key-a"), {}), (bearer("key-b"), {}), bearer("ops"), True),
    "gateway": ("gateway_server", ({**bearer("gw"), "X-Caller": "team-1"}, {}),
                ({**bearer("gw"), "X-Caller": "team-2"}, {}), bearer("ops"), True),
    "users": ("keyed_server", (bearer("key-a"), {"user": "alice"}), (bearer("key-a"), {"user": "bob"}),
              bearer("ops"), False),
}


def with_fields(path: str, body: dict, fields: dict) -> dict:
    """``body`` as this caller sends it: its end user as ``user``, on the Messages API as
    Anthropic names it, ``metadata.user_id``."""
    if path.startswith("/v1/messages") and "user" in fields:
        return {**body, "metadata": {"user_id": fields["user"]}}
    return {**body, **fields}


@pytest.fixture(params=[pytest.param(name, marks=pytest.mark.server(WAYS[name][0].removesuffix("_server")))
                        for name in WAYS])
def way(request):
    fixture, owner, other, operator, tenant = WAYS[request.param]
    return request.getfixturevalue(fixture), owner, other, operator, tenant


def test_no_route_shows_or_continues_another_callers_session(way):
    server, (owner, owner_fields), (other, other_fields), operator, other_tenant = way
    base = server.base
    model = call(base, "GET", "/v1/models", headers=owner)[1]["data"][0]["id"]
    sessions = {}
    for api in ("chat", "messages", "responses"):
        path, body, headers = step(api, None, [SECRET], model)
        status, answer, _ = call(base, "POST", path, with_fields(path, body, owner_fields), {**owner, **headers})
        assert status == 200, answer
        sessions[api] = answer
    sid = sessions["chat"]["arc"]["session"]
    oid = visible_id('cat({"path": "log0"})', SECRET)
    rid, rsid = sessions["responses"]["id"], sessions["responses"]["arc"]["session"]
    path, body, _ = step("responses", None, ["compacted: " + SECRET], model)  # a conversation of its own
    status, compacted, _ = call(base, "POST", "/v1/responses/compact", with_fields(
        path, {"model": model, "input": body["input"]}, owner_fields), owner)
    assert status == 200, compacted
    handle = compacted["output"][-1]
    before = {name: call(base, "GET", f"/v1/arc/sessions/{answer['arc']['session']}", headers=operator)[1]
              for name, answer in sessions.items()}

    attempts = []
    for api in ("chat", "messages", "responses"):
        for stream in (False, True):
            path, body, headers = step(api, None, [SECRET, "more"], model, stream=stream)
            body = with_fields(path, body, other_fields)
            named = sessions[api]["arc"]["session"]
            attempts.append((path, body, {**other, **headers, "X-ARC-Session": named}))
            attempts.append((path, {**body, "vllm_xargs": {"arc_session": named, "arc_debug": True}},
                             {**other, **headers}))
    for stream in (False, True):
        attempts.append(("/v1/responses", with_fields("/v1/responses", {
            "model": model, "input": "what did the tool say?", "previous_response_id": rid,
            "max_output_tokens": 2, "stream": stream, "vllm_xargs": {"arc_debug": True}}, other_fields), other))
        attempts.append(("/v1/responses", with_fields("/v1/responses", {
            "model": model, "input": [handle, {"role": "user", "content": "go on"}], "max_output_tokens": 2,
            "stream": stream, "vllm_xargs": {"arc_debug": True}}, other_fields), other))
    for path, body, headers in attempts:
        status, error, _ = call(base, "POST", path, body, headers)
        assert status == 404 and "OWNER-SECRET" not in json.dumps(error), (path, body.get("stream"), status)

    reads = [f"/v1/arc/sessions/{sid}", f"/v1/arc/sessions/{sid}/requests", f"/v1/arc/sessions/{sid}/observations/{oid}",
             f"/v1/arc/sessions/{sid}/catalog", f"/v1/arc/sessions/{sid}/view", f"/v1/arc/sessions/{sid}/timeline",
             f"/v1/arc/sessions/{sid}/search?q=SECRET"]
    for path in reads:
        assert call(base, "GET", path, headers=owner)[0] == 200, path
        assert call(base, "GET", path, headers=operator)[0] == 200, path  # the operator reads every one
        if other_tenant:
            status, error, _ = call(base, "GET", path, headers=other)
            assert status == 404 and "OWNER-SECRET" not in json.dumps(error), path
    if other_tenant:
        assert call(base, "DELETE", f"/v1/arc/sessions/{sid}", headers=other)[0] == 404
        listed = {row["id"] for row in call(base, "GET", "/v1/arc/sessions", headers=other)[1]["sessions"]}
        assert not listed & {answer["arc"]["session"] for answer in sessions.values()}
    listed = {row["id"] for row in call(base, "GET", "/v1/arc/sessions", headers=owner)[1]["sessions"]}
    assert {answer["arc"]["session"] for answer in sessions.values()} <= listed
    assert {answer["arc"]["session"] for answer in sessions.values()} <= {
        row["id"] for row in call(base, "GET", "/v1/arc/sessions", headers=operator)[1]["sessions"]}

    # Nothing the other tried changed a session, and the owner goes on where it was.
    after = {name: call(base, "GET", f"/v1/arc/sessions/{answer['arc']['session']}", headers=operator)[1]
             for name, answer in sessions.items()}
    assert [after[name]["requests"] for name in after] == [before[name]["requests"] for name in before]
    assert [after[name]["observations"] for name in after] == [before[name]["observations"] for name in before]
    status, answer, _ = call(base, "POST", "/v1/responses", with_fields("/v1/responses", {
        "model": model, "input": "and then?", "previous_response_id": rid, "max_output_tokens": 2}, owner_fields), owner)
    assert status == 200 and answer["arc"]["session"] == rsid


def test_behind_the_gateway_a_request_without_its_header_is_a_401(gateway_server):
    base = gateway_server.base
    model = call(base, "GET", "/v1/models", headers=bearer("gw"))[1]["data"][0]["id"]
    path, body, headers = step("chat", None, ["x"], model)
    for method, route, sent in (("POST", path, body), ("GET", "/v1/arc/sessions", None), ("POST", "/v1/arc/sessions", {})):
        status, error, _ = call(base, method, route, sent, {**bearer("gw"), **headers})
        assert status == 401 and "x-caller header" in error["error"]["message"], route
    status, error, _ = call(base, "POST", path, body, {**bearer("gw"), "X-Caller": "t" * 600})
    assert status == 400 and "at most 512" in error["error"]["message"]
    assert call(base, "GET", "/v1/arc/sessions", headers=bearer("ops"))[0] == 200  # the operator needs no gateway


@pytest.mark.parametrize("field, value", [("user", "\ud800"), ("safety_identifier", "s" * 600)])
def test_a_user_that_cannot_be_stored_is_a_400_before_anything_is(keyed_server, field, value):
    base, headers = keyed_server.base, bearer("key-a")
    model = call(base, "GET", "/v1/models", headers=headers)[1]["data"][0]["id"]
    count = len(call(base, "GET", "/v1/arc/sessions", headers=bearer("ops"))[1]["sessions"])
    for api in ("chat", "responses"):
        path, body, _ = step(api, None, ["x"], model)
        raw = json.dumps({**body, field: value}).encode()
        status, error, _ = call(base, "POST", path, raw=raw, headers=headers)
        assert status == 400 and field in error["error"]["message"], (api, error)
    assert len(call(base, "GET", "/v1/arc/sessions", headers=bearer("ops"))[1]["sessions"]) == count
