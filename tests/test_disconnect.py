"""A client gone is a request cancelled (issue 55): on every API, streamed or not, a client
that disconnects while its long answer is being generated leaves the engine running nothing
within seconds (vLLM's own routes do this with ``with_cancellation``; a stream's response
notices by itself), and the session keeps no answer it never sent (the request's record says
``unanswered``)."""

import time

import pytest

from tests.helpers.http_calls import call, leave_after, running

pytestmark = pytest.mark.slow
ASKED = 3_000  # tokens: tens of seconds of decoding on the tiny model here


def bodies(model: str) -> dict:
    words = "Count from one to a thousand, one number per line."
    return {
        "/v1/chat/completions": {"model": model, "messages": [{"role": "user", "content": words}],
                                 "max_tokens": ASKED, "ignore_eos": True},
        "/v1/messages": {"model": model, "max_tokens": ASKED, "messages": [{"role": "user", "content": words}]},
        "/v1/responses": {"model": model, "input": words, "max_output_tokens": ASKED},
    }


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/messages", "/v1/responses"])
def test_a_client_that_leaves_stops_its_request(arc_server, path, stream):
    base = arc_server.base
    model = call(base, "GET", "/v1/models")[1]["data"][0]["id"]
    _, session = call(base, "POST", "/v1/arc/sessions")
    body = {**bodies(model)[path], "stream": stream}
    leave_after(base, path, body, {"X-ARC-Session": session["id"]}, seconds=2.0)
    left = time.monotonic()
    while running(base) and time.monotonic() - left < 10:
        time.sleep(0.2)
    assert running(base) == 0, f"still generating {time.monotonic() - left:.1f} s after the client left"
    # Nothing half-done kept as answered: the request's record says no answer went out (what
    # it cost is kept), and the session goes on.
    _, records = call(base, "GET", f"/v1/arc/sessions/{session['id']}/requests")
    assert len(records) == 1 and records[0]["unanswered"] is True and records[0]["engine_calls"] == 1
    status, answer = call(base, "POST", "/v1/chat/completions", {
        "model": model, "max_tokens": 2, "messages": [{"role": "user", "content": "Still there?"}]},
        headers={"X-ARC-Session": session["id"]})
    assert status == 200 and answer["arc"]["session"] == session["id"]
