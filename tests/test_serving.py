"""`arc-vllm serve` end to end: a real vLLM server on 127.0.0.1, a real OpenAI client.

A tiny random-weight model (same tokenizer and chat template as the embedded model) serves
the plumbing tests; the embedded SmolLM2 serves the in-server recall loop.
"""

import itertools
import json
import shutil
import urllib.error
from pathlib import Path
import urllib.request

import pytest
from openai import BadRequestError, NotFoundError, OpenAI

from arc_vllm.model_prep import prepare_tiny
from arc_vllm.serving.local import Server
from tests.helpers.conversations import TOOLS, tool_turn, visible_id
from tests.helpers.http_calls import call, stream_events, streamed_text

# A session folder written before conversation ids were checked (tests/fixtures/stored_sessions).
OLD_SESSION = Path(__file__).parent / "fixtures" / "stored_sessions" / "sess_12cbdf4b2533c17fc42f5f83"

pytestmark = pytest.mark.slow




def client_for(server):
    client = OpenAI(base_url=server.base + "/v1", api_key="none", max_retries=0)
    return client, client.models.list().data[0].id






def test_session_drives_through_many_windows_within_budget(arc_server, smol):
    status, session = call(arc_server.base, "POST", "/v1/arc/sessions")
    assert status == 201 and session["id"].startswith("sess_")
    client, model = client_for(arc_server)
    messages = [{"role": "system", "content": "You are an agent."},
                {"role": "user", "content": "Read every log and report anomalies."}]
    budget, stored, cached, full = session["budget_tokens"], {}, 0, 0
    for index in range(14):
        body = "".join(f"log {index} line {n}: status ok, latency {n * 7 % 97} ms\n" for n in range(120))
        turn, signature = tool_turn(index, body)
        messages += turn
        stored[visible_id(signature, body)] = body
        response = client.chat.completions.create(
            model=model, messages=messages, max_tokens=8,
            extra_body={"vllm_xargs": {"arc_session": session["id"], "arc_debug": 1}})
        arc = response.model_extra["arc"]
        # Every view within budget, in the model's own tokens, and the engine agrees.
        for view in arc["views"]:
            assert smol.count_messages(view) <= budget
        assert response.usage.prompt_tokens <= budget and arc["view_tokens"] <= budget
        cached += arc["prefix_cached_tokens"]
        full = arc["conversation_tokens"]
        messages.append({"role": "assistant", "content": response.choices[0].message.content})
    assert full > 3 * 4096  # the conversation is more than three context windows long
    assert cached > 0       # prefix-stable views are served from vLLM's prefix cache
    status, info = call(arc_server.base, "GET", f"/v1/arc/sessions/{session['id']}")
    assert info["observations"] == 14 and info["compactions"] > 0 and info["requests"] == 14
    for id, body in stored.items():
        status, raw = call(arc_server.base, "GET", f"/v1/arc/sessions/{session['id']}/observations/{id}")
        assert status == 200 and raw.decode("utf-8") == body
    status, page = call(arc_server.base, "GET", f"/v1/arc/sessions/{session['id']}/catalog?page=1")
    assert status == 200 and page["ids"] and all(f"§{id}" in page["text"] for id in page["ids"])
    metrics = urllib.request.urlopen(arc_server.base + "/metrics").read().decode()
    for name in ("arc_compactions_total", "arc_recalls_total", "arc_view_tokens_bucket",
                 "arc_prefix_cached_tokens_total", "arc_prompt_tokens_total", "arc_store_bytes",
                 "arc_sessions", "vllm:prefix_cache_hits", "arc_engine_prefix_cached_tokens_total"):
        assert name in metrics
    # The scheduler hook saw the same requests and the same cache hits in the engine itself.
    engine = {line.split()[0]: float(line.split()[1]) for line in metrics.splitlines()
              if line.startswith("arc_engine_") and not line.startswith("#")}
    assert engine["arc_engine_requests_total"] >= 14
    assert engine["arc_engine_prefix_cached_tokens_total"] > 0


def test_sessions_are_isolated_and_resending_archives_nothing_twice(arc_server):
    client, model = client_for(arc_server)
    _, first = call(arc_server.base, "POST", "/v1/arc/sessions")
    _, second = call(arc_server.base, "POST", "/v1/arc/sessions")
    turn, signature = tool_turn(1, "SECRET=only-in-the-first-session\n")
    messages = [{"role": "user", "content": "task"}] + turn
    for _ in range(2):  # the same conversation twice: one observation
        client.chat.completions.create(model=model, messages=messages, max_tokens=4,
                                       extra_body={"vllm_xargs": {"arc_session": first["id"]}})
    id = visible_id(signature, "SECRET=only-in-the-first-session\n")
    assert call(arc_server.base, "GET", f"/v1/arc/sessions/{first['id']}")[1]["occurrences"] == 1
    status, error = call(arc_server.base, "GET", f"/v1/arc/sessions/{second['id']}/observations/{id}")
    assert status == 404 and second["id"] in error["error"]["message"]
    # A recall of the first session's id inside the second session fails, with no hint of it.
    response = client.chat.completions.create(
        # Greedy: the grammar allows every spelling of the choice, and a sampled one of many
        # short tokens would not fit (the shared server's sampler state is other tests' too).
        model=model, messages=[{"role": "user", "content": "task"}], max_tokens=12, temperature=0,
        extra_body={"vllm_xargs": {"arc_session": second["id"], "arc_debug": 1},
                    "structured_outputs": {"choice": [f"_recall §{id}"]}})
    shown = json.dumps(response.model_extra["arc"]["views"], ensure_ascii=False)
    assert "only-in-the-first-session" not in shown and f"no observation §{id}" in shown


def test_errors_are_clear_and_lose_nothing(arc_server):
    client, model = client_for(arc_server)
    with pytest.raises(NotFoundError, match="no ARC session"):
        client.chat.completions.create(model=model, messages=[{"role": "user", "content": "x"}],
                                       extra_body={"vllm_xargs": {"arc_session": "sess_nope"}})
    assert call(arc_server.base, "GET", "/v1/arc/sessions/sess_nope")[0] == 404
    status, error = call(arc_server.base, "POST", "/v1/arc/sessions", {"budgets": {"recent_turnz": 2}})
    assert status == 400 and "recent_turnz" in error["error"]["message"]
    status, error = call(arc_server.base, "POST", "/v1/arc/sessions", {"budgets": {"max_tokens": 4000}})
    assert status == 400 and "budgets" in error["error"]["message"]
    _, session = call(arc_server.base, "POST", "/v1/arc/sessions")
    turn, _ = tool_turn(1, "kept\n")
    client.chat.completions.create(model=model, messages=[{"role": "user", "content": "t"}] + turn,
                                   max_tokens=2, extra_body={"vllm_xargs": {"arc_session": session["id"]}})
    with pytest.raises(BadRequestError, match="messages"):
        client.chat.completions.create(model=model, messages=[],
                                       extra_body={"vllm_xargs": {"arc_session": session["id"]}})
    with pytest.raises(BadRequestError, match="n: must be a positive integer"):
        client.chat.completions.create(model=model, messages=[{"role": "user", "content": "t"}], n=0,
                                       extra_body={"vllm_xargs": {"arc_session": session["id"]}})
    # Until ARC acts, several choices pass through (after a compaction they are a 400).
    several = client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": "t"}] + turn, max_tokens=2, n=2,
        extra_body={"vllm_xargs": {"arc_session": session["id"]}})
    assert len(several.choices) == 2
    assert call(arc_server.base, "GET", f"/v1/arc/sessions/{session['id']}")[1]["observations"] == 1
    assert call(arc_server.base, "DELETE", f"/v1/arc/sessions/{session['id']}")[0] == 200
    assert call(arc_server.base, "GET", f"/v1/arc/sessions/{session['id']}")[0] == 404


def test_a_request_naming_no_session_gets_one_by_its_conversation(arc_server):
    """Implicit sessions: the same conversation, resent longer, stays in one session; another
    caller (API key, ``user``), or an edited history, gets a session of its own."""
    client, model = client_for(arc_server)
    messages = [{"role": "user", "content": "Find the port in the logs."}]

    def ask(messages, **extra):
        reply = client.chat.completions.create(model=model, max_tokens=3, messages=messages, **extra)
        return reply.model_extra["arc"]

    first = ask(messages)
    for index in range(3):
        turn, _ = tool_turn(index, f"log {index}: port {8000 + index}\n" * 20)
        messages = messages + [{"role": "assistant", "content": "ok"}] + turn
        arc = ask(messages)
        assert arc["session"] == first["session"] and arc["observations"] == index + 1
    status, described = call(arc_server.base, "GET", f"/v1/arc/sessions/{first['session']}")
    assert status == 200 and described["implicit"] and described["requests"] == 4
    # The response names the session in a header too, so a client may pin it from now on.
    raw = client.chat.completions.with_raw_response.create(model=model, max_tokens=3, messages=messages)
    assert raw.headers["x-arc-session"] == first["session"] == raw.parse().model_extra["arc"]["session"]
    other_key = OpenAI(base_url=arc_server.base + "/v1", api_key="team-b", max_retries=0)
    assert other_key.chat.completions.create(model=model, max_tokens=3, messages=messages) \
        .model_extra["arc"]["session"] != first["session"]
    assert ask(messages, user="someone-else")["session"] != first["session"]
    edited = [{"role": "user", "content": "Find the host in the logs."}] + messages[1:]
    assert ask(edited)["session"] != first["session"]
    assert ask(messages + [{"role": "user", "content": "and?"}])["session"] == first["session"]


def test_the_header_names_a_session(arc_server):
    client, model = client_for(arc_server)
    _, session = call(arc_server.base, "POST", "/v1/arc/sessions")
    via_header = client.chat.completions.create(
        model=model, max_tokens=3, messages=[{"role": "user", "content": "hello"}],
        extra_headers={"X-ARC-Session": session["id"]})
    assert via_header.model_extra["arc"]["session"] == session["id"]






def test_a_streamed_session_answer_streams_as_it_is_generated(arc_server):
    client, model = client_for(arc_server)
    _, session = call(arc_server.base, "POST", "/v1/arc/sessions")
    body = {"model": model, "max_tokens": 64, "ignore_eos": True, "stream": True,
            "messages": [{"role": "user", "content": "hello"}],
            "vllm_xargs": {"arc_session": session["id"]}}
    events = stream_events(arc_server.base, body)
    assert events[-1][1] == "[DONE]"
    chunks = [event for _, event in events[:-1]]
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    content = [chunk for chunk in chunks if chunk["choices"] and chunk["choices"][0]["delta"].get("content")]
    assert len(content) >= 32  # delta by delta, not one piece at the end
    # Events arrive while the answer is generated: the first long before the last.
    first, last = events[0][0], events[-2][0]
    assert first < 0.5 * last
    # Without usage asked for, the finish_reason chunk is the last and carries the arc object.
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"
    assert chunks[-1]["arc"]["session"] == session["id"] and chunks[-1]["arc"]["engine_calls"] == 1
    # The OpenAI client reads the same stream; with usage asked for, the usage chunk is last
    # and carries the arc object.
    stream = client.chat.completions.create(
        model=model, max_tokens=6, stream=True, stream_options={"include_usage": True},
        messages=[{"role": "user", "content": "hello"}],
        extra_body={"vllm_xargs": {"arc_session": session["id"]}})
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    assert any(chunk.choices and chunk.choices[0].finish_reason for chunk in chunks)
    assert chunks[-1].usage is not None and chunks[-1].usage.prompt_tokens > 0
    assert chunks[-1].model_extra["arc"]["session"] == session["id"]


def test_a_command_served_mid_stream_never_reaches_the_client(arc_server):
    _, session = call(arc_server.base, "POST", "/v1/arc/sessions", {"budgets": {"recalls_per_step": 1}})
    client, model = client_for(arc_server)
    body = "status line\n" * 300
    turn, signature = tool_turn(0, body)
    messages = [{"role": "user", "content": "Read the log."}] + turn
    oid = visible_id(signature, body)
    # The model is made to say a line, then a command (structured outputs), at every call: the
    # first call's command is served inside the server and the model generates again; the
    # second is the step's last (r = 1), so its text, command line included, is the answer.
    events = stream_events(arc_server.base, {
        "model": model, "max_tokens": 40, "stream": True, "messages": messages,
        "structured_outputs": {"regex": f"Checking\\.\\n_recall §{oid}\\n"},
        "vllm_xargs": {"arc_session": session["id"]}})
    arc = events[-2][1]["arc"]
    assert arc["commands_served"] == 1 and arc["recalls"] == 1 and arc["engine_calls"] == 2
    # The served command line never reached the client; the line before it did, as it came.
    assert streamed_text(events) == f"Checking.\nChecking.\n_recall §{oid}\n"
    # ARC's own tool calls never reach the client either: the model is made to call _recall
    # (offered once ARC has acted, so the conversation is made long enough to compact).
    _, session = call(arc_server.base, "POST", "/v1/arc/sessions", {"budgets": {"recalls_per_step": 1}})
    for index in range(1, 8):
        messages += tool_turn(index, f"status line {index}\n" * 300)[0]
    tools = [{"type": "function", "function": {"name": "cat", "parameters": {
        "type": "object", "properties": {"path": {"type": "string"}}}}}]
    events = stream_events(arc_server.base, {
        "model": model, "max_tokens": 40, "stream": True, "messages": messages, "tools": tools,
        "tool_choice": {"type": "function", "function": {"name": "_recall"}},
        "vllm_xargs": {"arc_session": session["id"]}})
    chunks = [event for _, event in events[:-1]]
    assert not any(chunk["choices"] and chunk["choices"][0]["delta"].get("tool_calls") for chunk in chunks)
    # Not "tool_calls": the client was shown none ("length" when the forced call ran long).
    assert chunks[-1]["arc"]["engine_calls"] == 2
    assert chunks[-1]["choices"][0]["finish_reason"] in ("stop", "length")


def test_a_streamed_request_that_fails_before_its_first_event_gets_an_http_error(arc_server):
    client, model = client_for(arc_server)
    with pytest.raises(NotFoundError):
        list(client.chat.completions.create(model=model, max_tokens=2, stream=True,
                                            messages=[{"role": "user", "content": "x"}],
                                            extra_body={"vllm_xargs": {"arc_session": "sess_nope"}}))
    _, session = call(arc_server.base, "POST", "/v1/arc/sessions")
    sid, first = session["id"], [{"role": "user", "content": "Read the log."}]
    client.chat.completions.create(model=model, max_tokens=2, messages=first, extra_body={"vllm_xargs": {"arc_session": sid}})

    def held() -> dict:  # what the session holds, its last use aside
        _, described = call(arc_server.base, "GET", f"/v1/arc/sessions/{sid}")
        return {name: value for name, value in described.items() if name != "last_used"}

    before = held()
    assert before["requests"] == 1
    with pytest.raises(BadRequestError, match="messages"):
        list(client.chat.completions.create(model=model, max_tokens=2, stream=True,
                                            messages=first + [{"role": "robot", "content": "x"}],
                                            extra_body={"vllm_xargs": {"arc_session": sid}}))
    # The session was left as it was, and serves the next request.
    assert held() == before
    reply = client.chat.completions.create(model=model, max_tokens=2,
                                           messages=first + [{"role": "assistant", "content": "ok"},
                                                             {"role": "user", "content": "x"}],
                                           extra_body={"vllm_xargs": {"arc_session": sid}})
    assert reply.model_extra["arc"]["session"] == sid and held()["requests"] == 2


def test_durable_sessions_survive_kill_9(durable_server, tmp_path):
    server = durable_server  # started ahead, on a store folder of its own
    store_dir = server.log.parent / "sessions"
    model = str(prepare_tiny())
    try:
        client, name = client_for(server)
        _, session = call(server.base, "POST", "/v1/arc/sessions")
        messages, stored = [{"role": "user", "content": "task"}], {}
        for index in range(4):
            body = f"durable observation {index}\n" * (50 * (index + 1)) + "é😀\x00"
            turn, signature = tool_turn(index, body)
            messages += turn
            stored[visible_id(signature, body)] = body
            reply = client.chat.completions.create(
                model=name, messages=messages, max_tokens=2,
                extra_body={"vllm_xargs": {"arc_session": session["id"], "arc_debug": True}})
        # The last view minus its newest turn: what the next view starts with, restart or not.
        before = reply.model_extra["arc"]["views"][-1][:-1]
    finally:
        server.kill()
    # Beside it, a session stored by earlier code with a client id that is not valid text.
    shutil.copytree(OLD_SESSION, store_dir / OLD_SESSION.name)
    server = Server(model, tmp_path / "second.log", "--arc-store-dir", str(store_dir)).wait()
    try:
        status, listed = call(server.base, "GET", "/v1/arc/sessions")
        assert status == 200
        assert {row["id"]: row["client_id"] for row in listed["sessions"]}[OLD_SESSION.name] == "\\ud800bad"
        status, info = call(server.base, "GET", f"/v1/arc/sessions/{session['id']}")
        assert status == 200 and info["observations"] == 4 and info["durable"]
        assert info["requests"] == 4  # the session's counts came back too, not only its store
        for id, body in stored.items():
            status, raw = call(server.base, "GET", f"/v1/arc/sessions/{session['id']}/observations/{id}")
            assert status == 200 and raw.decode("utf-8") == body
        client, name = client_for(server)
        turn, signature = tool_turn(9, "after the restart\n")
        response = client.chat.completions.create(
            model=name, messages=messages + turn, max_tokens=2,
            extra_body={"vllm_xargs": {"arc_session": session["id"], "arc_debug": True}})
        arc = response.model_extra["arc"]
        assert arc["observations"] == 5  # the resent ones not again
        # The context came back too (turns, catalog, compaction state): the view is the one
        # the first server would have sent, earlier turns verbatim where they were.
        assert arc["views"][0][:len(before)] == before
        # The conversation's size without ARC kept counting from where it was.
        assert arc["conversation_tokens"] > 4 * 50 * 5
        ids_that_name_no_session(server, session["id"])
    finally:
        server.stop()


def ids_that_name_no_session(server, real: str):
    """Ids no session has (5,000 characters, paths, encodings of ``..``) on every route that
    takes one: a clear 404, never a 5xx, never a file outside the store; the real one serves."""
    from urllib.parse import quote

    bad = ["sess_" + "a" * 5000, "..", quote("../" + real, safe=""), "%2e%2e%2f", real + "x", "sess_%00"]
    routes = ["", "/view", "/timeline", "/requests", "/catalog", "/search?q=x", "/observations/0123abcd"]
    for sid in bad:
        for route in routes:
            status, error = call(server.base, "GET", f"/v1/arc/sessions/{sid}{route}")
            assert status == 404, (sid[:50], route, status)
            assert len(json.dumps(error)) < 400  # the id is shown shortened
        status, _ = call(server.base, "POST", "/v1/chat/completions", {
            "model": "m", "messages": [{"role": "user", "content": "x"}]}, headers={"X-ARC-Session": sid[:6000]})
        assert status == 404
    assert call(server.base, "GET", f"/v1/arc/sessions/{real}/view")[0] == 200


def test_ids_that_name_no_session_get_404_without_a_store(arc_server):
    _, session = call(arc_server.base, "POST", "/v1/arc/sessions")
    ids_that_name_no_session(arc_server, session["id"])


def test_in_server_recall_loop_with_the_embedded_model(smol_server, smol):
    """Structured outputs make SmolLM2 emit a recall of a known id; the server serves it and
    generates again: the next view the engine saw holds the exact stored text (a session of
    4,096 tokens on the shared 16k server)."""
    server = smol_server
    client, model = client_for(server)
    _, session = call(server.base, "POST", "/v1/arc/sessions", {"budgets": {"context_window": 4096}})
    # One recall chunk long; the needle in the middle, where no preview shows it.
    rows = [f"row {n}: value {n * n}\n" for n in range(40)]
    secret = "".join(rows[:20]) + "NEEDLE=KQXWVTRB\n" + "".join(rows[20:])
    turn, signature = tool_turn(1, secret)
    messages = [{"role": "user", "content": "Find the needle in log1.txt."}] + turn
    # More reading, so the first log is summarised and cited: logs that each fit H, so turns
    # leave it (a log over H's cap would be cited in place, and the first one kept).
    for index in range(2, 10):
        more, _ = tool_turn(index, f"noise {index}\n" * 150)
        messages += more
    id = visible_id(signature, secret)
    response = client.chat.completions.create(
        model=model, messages=messages, max_tokens=16,
        extra_body={"vllm_xargs": {"arc_session": session["id"], "arc_debug": 1},
                    "structured_outputs": {"choice": [f"_recall §{id}"]}})
    arc = response.model_extra["arc"]
    views = arc["views"]
    first = "\n".join(message["content"] for message in views[0])
    assert "NEEDLE=KQXWVTRB" not in first and f"§{id}" in first
    assert arc["commands_served"] == 2 and arc["recalls"] == 2 and arc["engine_calls"] == 3
    later = "\n".join(message["content"] for message in views[1])
    assert secret in later  # the exact stored text, in the prompt of the continuation
    assert all(smol.count_messages(view) <= arc["budget_tokens"] for view in views)
    assert response.choices[0].message.content == f"_recall §{id}"  # r reached: returned


def test_openai_backend_drives_an_episode_through_the_server(arc_server, smol):
    """The benchmark's HTTP backend against the served engine: actions held to the task's
    commands by structured outputs over HTTP, usage (with cached tokens) recorded per call."""
    import re

    from arc_vllm.agent.backends import ContextLengthError, OpenAIBackend
    from arc_vllm.agent.loop import run_episode
    from arc_vllm.agent.model_agent import model_agent
    from arc_vllm.evaluation.niah import make_task
    from arc_vllm.policies import SlidingWindow

    backend = OpenAIBackend(arc_server.base + "/v1")
    task = make_task(42, 1)
    policy = SlidingWindow(smol, 3000, task=task.prompt)
    agent = model_agent(backend, 64, task, policy)
    result = run_episode(policy, task, agent, smol, 3000, max_calls=3)
    assert result["calls"] >= 1 and not result["crashed"]
    assert all(entry[3] is not None for entry in result["trace"])  # cached tokens reported
    assert re.fullmatch(task.action_regex, agent.act(policy.render())[1])
    with pytest.raises(ContextLengthError):
        backend.complete([{"role": "user", "content": "word " * 5000}], 8)
    backend.close()




def test_native_tool_calls_keep_their_structure_and_the_count_is_the_engines(arc_server):
    """A function-calling client: the view keeps assistant tool_calls and role-tool results
    (a cited observation is a tool message holding its stub), the tools the template
    renders are counted, and the engine's prompt_tokens equal ARC's view_tokens exactly,
    before and after compactions."""
    client, model = client_for(arc_server)
    _, session = call(arc_server.base, "POST", "/v1/arc/sessions")
    messages = [{"role": "system", "content": "You are an agent. " + "Be careful. " * 200},
                {"role": "user", "content": "Read every log."}]
    compactions, stubbed = 0, False
    for index in range(10):
        body = "".join(f"log {index} line {n}: ok\n" for n in range(40 + 60 * (index % 3)))
        turn, _ = tool_turn(index, body)
        turn[0]["content"] = None if index % 2 else turn[0]["content"]  # null content: common
        messages += turn
        response = client.chat.completions.create(
            model=model, messages=messages, max_tokens=4, tools=TOOLS,
            extra_body={"vllm_xargs": {"arc_session": session["id"], "arc_debug": 1}})
        arc = response.model_extra["arc"]
        assert arc["engine_calls"] == 1 and response.usage.prompt_tokens == arc["view_tokens"]
        [view] = arc["views"]
        calls = [m for m in view if m["role"] == "assistant" and m.get("tool_calls")]
        results = [m for m in view if m["role"] == "tool"]
        assert calls and len(results) == sum(len(m["tool_calls"]) for m in calls)
        ids = {c["id"] for m in calls for c in m["tool_calls"]}
        assert {m["tool_call_id"] for m in results} == ids
        assert all(c["function"]["name"] == "cat" for m in calls for c in m["tool_calls"])
        stubbed |= any("(_recall §" in m["content"] for m in results)
        compactions += arc["compactions"]
        messages.append({"role": "assistant", "content": response.choices[0].message.content or ""})
    assert compactions >= 1 and stubbed


def test_a_conversation_that_fits_is_never_cited(arc_server):
    """372 of 3,584 tokens used, then a 400-line tool result (about 2,000 tokens): it fits,
    so the model sees it in full, not as a stub it must recall."""
    client, model = client_for(arc_server)
    _, session = call(arc_server.base, "POST", "/v1/arc/sessions")
    messages = [{"role": "user", "content": "Find the failing test."}]
    body = "".join(f"test_{n} passed\n" for n in range(400))
    turn, _ = tool_turn(1, body)
    response = client.chat.completions.create(
        model=model, messages=messages + turn, max_tokens=4, tools=TOOLS,
        extra_body={"vllm_xargs": {"arc_session": session["id"], "arc_debug": 1}})
    arc = response.model_extra["arc"]
    [view] = arc["views"]
    assert arc["compactions"] == 0 and 1500 < arc["view_tokens"] <= arc["budget_tokens"]
    assert [m["content"] for m in view if m["role"] == "tool"] == [body]


def test_a_long_task_prefix_is_accepted_and_one_too_long_is_refused_clearly(arc_server):
    client, model = client_for(arc_server)
    _, session = call(arc_server.base, "POST", "/v1/arc/sessions")
    # About 1,000 tokens of system prompt and task: over the old fixed B (286 at 4k).
    messages = [{"role": "system", "content": "Rules. " + "Always run the tests. " * 150},
                {"role": "user", "content": "Fix the bug. " * 60}]
    response = client.chat.completions.create(
        model=model, messages=messages, max_tokens=4,
        extra_body={"vllm_xargs": {"arc_session": session["id"]}})
    assert response.model_extra["arc"]["prefix_tokens"] > 1000
    _, other = call(arc_server.base, "POST", "/v1/arc/sessions")
    with pytest.raises(BadRequestError) as refused:
        client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": "word " * 3000}], max_tokens=4,
            extra_body={"vllm_xargs": {"arc_session": other["id"]}})
    message = str(refused.value)
    assert "task prefix F" in message and "L = 3584" in message and "at least" in message
    assert call(arc_server.base, "GET", f"/v1/arc/sessions/{other['id']}")[1]["observations"] == 0


def test_a_prefix_at_the_stated_maximum_is_served_past_compactions(arc_server):
    """Refuse only what cannot fit: a function-calling client whose task prefix is within a
    few tokens of the maximum the refusal states is served past several compactions (its
    recall chunks and catalog pages shrunk to the room left; ARC's tools are not offered
    where they would not fit, the note's text commands still are), every view within L
    and every observation back exactly."""
    import re

    client, model = client_for(arc_server)
    _, probe = call(arc_server.base, "POST", "/v1/arc/sessions")
    status, refused = call(arc_server.base, "POST", "/v1/chat/completions", {
        "model": model, "messages": [{"role": "user", "content": "word " * 4000}],
        "max_tokens": 4, "tools": TOOLS, "vllm_xargs": {"arc_session": probe["id"]}})
    assert status == 400
    limit = int(re.search(r"F may be at most (\d+) tokens", refused["error"]["message"])[1])

    def request(words, turns, session):
        messages = [{"role": "system", "content": "word " * words},
                    {"role": "user", "content": "Read every log."}] + turns
        return client.chat.completions.create(
            model=model, messages=messages, max_tokens=4, tools=TOOLS,
            extra_body={"vllm_xargs": {"arc_session": session}})

    size = request(1000, [], probe["id"]).model_extra["arc"]["prefix_tokens"]
    words = 1000 + limit - size - 4
    _, session = call(arc_server.base, "POST", "/v1/arc/sessions")
    turns, bodies, compactions = [], {}, 0
    for index in range(8):
        body = "".join(f"log {index} line {n}: ok\n" for n in range(30 + 25 * index))
        turn, signature = tool_turn(index, body)
        turns += turn
        bodies[visible_id(signature, body)] = body
        arc = request(words, turns, session["id"]).model_extra["arc"]
        assert limit - 8 <= arc["prefix_tokens"] <= limit
        assert arc["view_tokens"] <= arc["budget_tokens"]
        compactions += arc["compactions"]
        turns.append({"role": "assistant", "content": "ok"})
    assert compactions >= 2
    for id, body in bodies.items():
        status, raw = call(arc_server.base, "GET", f"/v1/arc/sessions/{session['id']}/observations/{id}")
        assert status == 200 and raw.decode() == body


@pytest.fixture(scope="module")
def capped_servers(capped_durable_server, capped_server):
    """Two servers under ``--arc-max-sessions 20``, with a store folder (True) and without
    (False)."""
    return {True: capped_durable_server, False: capped_server}


@pytest.mark.parametrize("durable", [True, False])
def test_under_a_session_cap_memory_holds_the_cap_and_nothing_durable_is_lost(capped_servers, durable):
    """--arc-max-sessions 20 and 60 sessions with an observation each: at most 20 stay in
    memory; with a store folder every one answers its next request with all it stored, without
    one those that left memory answer 410."""
    server = capped_servers[durable]
    client, model = client_for(server)
    sessions = {}
    for index in range(60):
        _, session = call(server.base, "POST", "/v1/arc/sessions")
        body = f"session {index} observation\n" * 40
        turn, signature = tool_turn(index, body)
        messages = [{"role": "user", "content": f"task {index}"}] + turn
        client.chat.completions.create(model=model, max_tokens=2, messages=messages,
                                       extra_body={"vllm_xargs": {"arc_session": session["id"]}})
        sessions[session["id"]] = (messages, visible_id(signature, body), body)
    metrics = urllib.request.urlopen(server.base + "/metrics").read().decode()
    [in_memory] = [float(line.split()[-1]) for line in metrics.splitlines() if line.startswith("arc_sessions ")]
    assert in_memory <= 20
    listed = call(server.base, "GET", "/v1/arc/sessions")[1]["sessions"]
    gone = []
    for sid, (messages, oid, body) in sessions.items():
        status, stored = call(server.base, "GET", f"/v1/arc/sessions/{sid}/observations/{oid}")
        if status == 410:
            gone.append(sid)
            continue
        assert status == 200 and stored.decode() == body
        reply = client.chat.completions.create(model=model, max_tokens=2, messages=messages + [
            {"role": "user", "content": "next"}], extra_body={"vllm_xargs": {"arc_session": sid}})
        assert reply.model_extra["arc"]["observations"] == 2  # its own, and the new message
    if durable:
        assert not gone and len(listed) == 60 and sum(row["in_memory"] for row in listed) <= 20
    else:
        assert len(gone) >= 40 and len(listed) <= 20


def drive(send, turns: int, tag: str) -> list[dict]:
    """A tool-using conversation past the tiny server's 4k window, sent whole every turn with
    no session named; the replies' arc objects (None where the client drops them)."""
    messages, arcs = [{"role": "user", "content": f"Audit the logs ({tag})."}], []
    for index in range(turns):
        turn, _ = tool_turn(index, f"{tag} log {index}: status {index * 37 % 91}\n" * 60)
        messages += turn
        content, arc = send(messages)
        arcs.append(arc)
        messages.append({"role": "assistant", "content": content or "ok"})
    return arcs


def test_clients_that_name_no_session_stay_within_the_window_past_many_compactions(arc_server):
    """The unmodified OpenAI client and litellm, sending only messages: ARC keeps each
    conversation in a session of its own, within budget, and every observation comes back
    exactly through the session the responses name."""
    import litellm

    client, model = client_for(arc_server)

    def by_openai(messages):
        reply = client.chat.completions.create(model=model, max_tokens=4, messages=messages)
        return reply.choices[0].message.content, reply.model_extra["arc"]

    def by_litellm(messages):
        reply = litellm.completion(model=f"openai/{model}", api_base=arc_server.base + "/v1", api_key="none",
                                   max_tokens=4, messages=messages)
        return reply.choices[0].message.content, None

    arcs = drive(by_openai, 12, "openai")
    assert len({arc["session"] for arc in arcs}) == 1
    assert all(arc["view_tokens"] <= arc["budget_tokens"] for arc in arcs)
    assert sum(arc["compactions"] for arc in arcs) >= 2
    sid = arcs[0]["session"]
    for index in range(12):
        body = f"openai log {index}: status {index * 37 % 91}\n" * 60
        _, signature = tool_turn(index, body)
        status, stored = call(arc_server.base, "GET", f"/v1/arc/sessions/{sid}/observations/{visible_id(signature, body)}")
        assert status == 200 and stored.decode() == body
    drive(by_litellm, 12, "litellm")
    sessions = call(arc_server.base, "GET", "/v1/arc/sessions")[1]["sessions"]
    [mine] = [row for row in sessions if row["implicit"] and row["requests"] == 12 and row["id"] != sid
              and row["observations"] == 12]
    assert mine["compactions"] >= 2


def test_interleaved_conversations_and_callers_never_mix(arc_server):
    """Two conversations and two callers with byte-identical messages, their requests
    interleaved at random (hypothesis): each (caller, conversation) keeps one session of its
    own, holding only its own observations."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    _, model = client_for(arc_server)
    clients = {key: OpenAI(base_url=arc_server.base + "/v1", api_key=key, max_retries=0) for key in ("k1", "k2")}

    examples = itertools.count()

    @settings(max_examples=3, deadline=None)
    @given(st.permutations([(key, tag) for key in clients for tag in ("a", "b") for _ in range(3)]))
    def run(order):
        # Each example's conversations are new ones: the same first message would continue
        # the sessions an earlier example (or a replay while shrinking) started, as it should.
        example = next(examples)
        conversations = {(key, tag): [{"role": "user", "content": f"Task {tag} ({example})."}]
                         for key in clients for tag in ("a", "b")}
        seen = {}
        for key, tag in order:
            messages = conversations[(key, tag)]
            step = sum(1 for message in messages if message["role"] == "tool")
            messages += tool_turn(step, f"{tag} step {step}\n" * 30)[0]
            arc = clients[key].chat.completions.create(model=model, max_tokens=2, messages=messages) \
                .model_extra["arc"]
            assert seen.setdefault((key, tag), arc["session"]) == arc["session"]
            assert arc["observations"] == step + 1
            messages.append({"role": "assistant", "content": "ok"})
        assert len(set(seen.values())) == 4  # never shared across callers or conversations

    run()
