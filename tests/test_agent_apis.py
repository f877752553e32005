"""ARC on the Anthropic Messages API and the Responses API, with the real SDKs (``anthropic``,
``openai``), unmodified, against a real server on the tiny model (4,096 tokens) and plain
vLLM beside it:

- tool loops twice the window long and more, streamed and not: every view within the budget,
  every observation back exactly, one session per conversation, under the client's own id
  where it sends one;
- until ARC acts, the prompt is the one plain vLLM builds for that API (the same tokens and
  the same greedy answer), and ``max_tokens`` is granted as plain vLLM grants it, on every API;
- interleaved conversations of two callers never mix; a rewritten history under the client's
  own id continues its session with nothing lost; ``previous_response_id`` and
  ``GET /v1/responses/{id}`` work; ``count_tokens`` answers for the view;
- bad bodies get clear 4xx answers in the API's own error form, never a 5xx, and nothing
  stored is lost.
"""

import json
import random

import anthropic
import pytest
from openai import OpenAI

from tests.helpers.api_calls import call, log, model_of, stored_exactly
from tests.helpers.conversations import visible_id

pytestmark = pytest.mark.slow


TOOLS = [{"name": "cat", "description": "Read a file.",
          "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}}]


def test_messages_sdk_tool_loop_past_the_window_in_one_session(arc_server, smol):
    """A Claude-Code-shaped loop with the anthropic SDK, ``create`` and ``stream`` in turn:
    thinking blocks with signatures, tool_result content as a string and as blocks, a system
    message inside ``messages``, cache_control marks; three windows and more of history."""
    client = anthropic.Anthropic(base_url=arc_server.base, api_key="caller-a", max_retries=0)
    model = model_of(arc_server)
    messages = [{"role": "user", "content": [{"type": "text", "text": "Read every log."}]}]
    stored, sessions, conversation = {}, set(), 0
    for index in range(14):
        body, path = log(index), {"path": f"log{index}.txt"}
        result = body if index % 2 else [{"type": "text", "text": body}]
        messages += [{"role": "assistant", "content": [
                          {"type": "thinking", "thinking": f"log {index} next", "signature": f"sig{index}"},
                          {"type": "text", "text": f"Reading log {index}."},
                          {"type": "tool_use", "id": f"tu{index}", "name": "cat", "input": path}]},
                     {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"tu{index}", "content": result,
                                                   "cache_control": {"type": "ephemeral"}}]}]
        stored[visible_id(f"cat({json.dumps(path)})", body)] = body
        kwargs = dict(model=model, max_tokens=8, system=[{"type": "text", "text": "You are an agent."}],
                      messages=messages, tools=TOOLS, extra_body={"vllm_xargs": {"arc_debug": True}})
        if index % 2:
            with client.messages.stream(**kwargs) as stream:
                arc = next(event.model_extra["arc"] for event in stream if event.type == "message_delta")
                answer = stream.get_final_message()
        else:
            answer = client.messages.create(**kwargs)
            arc = answer.model_extra["arc"]
        assert answer.type == "message" and answer.role == "assistant" and answer.stop_reason
        usage = answer.usage
        assert usage.input_tokens + (usage.cache_read_input_tokens or 0) + (usage.cache_creation_input_tokens or 0) \
            == arc["view_tokens"] <= arc["budget_tokens"] == 4096 - 512
        for view in arc["views"]:
            assert smol.count_messages(view) <= arc["budget_tokens"]
        sessions.add(arc["session"])
        conversation = arc["conversation_tokens"]
        messages.append({"role": "assistant", "content": [{"type": "text", "text": "ok"}]})
        messages.append({"role": "system", "content": "<system-reminder>keep going</system-reminder>"})
        messages.append({"role": "user", "content": "next"})
    [sid] = sessions
    assert conversation > 2 * 4096
    info = call(arc_server.base, "GET", f"/v1/arc/sessions/{sid}")[1]
    assert info["requests"] == 14 and info["compactions"] > 0 and info["observations"] >= 14
    assert stored_exactly(arc_server, sid, stored) == 14
    records = call(arc_server.base, "GET", f"/v1/arc/sessions/{sid}/requests")[1]
    assert {record["api"] for record in records} == {"messages"}


def test_responses_sdk_tool_loop_past_the_window_in_one_session(arc_server):
    """Codex-shaped (``store: false``, the whole input every turn, ``prompt_cache_key``) and
    ``previous_response_id`` continuations, ``create`` and ``stream``: one session, under
    the client's own key, past the window."""
    client = OpenAI(base_url=arc_server.base + "/v1", api_key="caller-r", max_retries=0)
    model = model_of(arc_server)
    tools = [{"type": "function", "name": "cat", "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}]
    items = [{"role": "developer", "content": [{"type": "input_text", "text": "You are an agent."}]},
             {"role": "user", "content": [{"type": "input_text", "text": "Read every log."}]}]
    stored, sessions, previous = {}, set(), None
    for index in range(12):
        body, arguments = log(index), json.dumps({"path": f"log{index}.txt"})
        new = [{"type": "function_call", "call_id": f"c{index}", "name": "cat", "arguments": arguments},
               {"type": "function_call_output", "call_id": f"c{index}", "output": body}]
        items += new
        stored[visible_id(f"cat({arguments})", body)] = body
        kwargs = dict(model=model, tools=tools, max_output_tokens=8, extra_body={"vllm_xargs": {"arc_debug": True}})
        if index % 3 == 2:
            response = client.responses.create(input=new, previous_response_id=previous, **kwargs)
        elif index % 3 == 1:
            with client.responses.stream(input=items, store=False, prompt_cache_key="thread-r", **kwargs) as stream:
                kinds = [event.type for event in stream]
                response = stream.get_final_response()
            assert kinds[:2] == ["response.created", "response.in_progress"] and kinds[-1] == "response.completed"
        else:
            response = client.responses.create(input=items, store=False, prompt_cache_key="thread-r", **kwargs)
        arc = response.model_extra["arc"]
        assert response.object == "response" and response.status in ("completed", "incomplete")
        assert response.usage.input_tokens == arc["view_tokens"] <= arc["budget_tokens"] == 4096 - 512
        assert response.id.startswith(f"resp_{arc['session']}_")
        sessions.add(arc["session"])
        previous = response.id
        for item in response.output:  # the client's own history grows by the model's output
            if item.type == "message":
                items.append({"role": "assistant", "content": item.content[0].text})
            elif item.type == "function_call":
                items.append({"type": "function_call", "call_id": item.call_id, "name": item.name,
                              "arguments": item.arguments})
    [sid] = sessions
    info = call(arc_server.base, "GET", f"/v1/arc/sessions/{sid}")[1]
    assert info["client_id"] == "thread-r" and info["requests"] == 12 and info["rebases"] == 0
    assert info["occurrences"] == 12 and info["compactions"] > 0  # each observation taken in once
    assert arc["conversation_tokens"] > 2 * 4096
    assert stored_exactly(arc_server, sid, stored) == 12
    # vLLM keeps the response (store on, VLLM_ENABLE_RESPONSES_API_STORE=1): GET finds it.
    kept = client.responses.create(model=model, input="one more", previous_response_id=previous, max_output_tokens=4)
    assert client.responses.retrieve(kept.id).id == kept.id


def test_until_arc_acts_each_api_gets_plain_vllms_prompt_and_answer(arc_server, plain_server):
    """The same conversation through ARC and through plain vLLM: the same prompt tokens, the
    same greedy answer, on the Messages and the Responses APIs (no session named)."""
    model = model_of(arc_server)
    anthropic_body = {"model": model, "max_tokens": 24, "temperature": 0, "tools": TOOLS,
                      "system": [{"type": "text", "text": "You are terse."}, {"type": "text", "text": "Be exact.",
                                                                             "cache_control": {"type": "ephemeral"}}],
                      "messages": [{"role": "user", "content": "Read a.log."},
                                   {"role": "assistant", "content": [
                                       {"type": "thinking", "thinking": "read it", "signature": "s1"},
                                       {"type": "tool_use", "id": "t1", "name": "cat", "input": {"path": "a.log"}}]},
                                   {"role": "user", "content": [
                                       {"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": log(1, 20)}]},
                                       {"type": "text", "text": "Summarise.", "cache_control": {"type": "ephemeral"}}]},
                                   {"role": "system", "content": "<system-reminder>be brief</system-reminder>"},
                                   {"role": "user", "content": "Now."}]}
    responses_body = {"model": model, "max_output_tokens": 24, "temperature": 0,
                      "tools": [{"type": "function", "name": "cat", "parameters": {"type": "object"}}],
                      "input": [{"role": "developer", "content": "Be terse."}, {"role": "user", "content": "Read a.log."},
                                {"type": "function_call", "call_id": "c1", "name": "cat", "arguments": "{\"path\": \"a.log\"}"},
                                {"type": "function_call_output", "call_id": "c1", "output": log(1, 20)},
                                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Summarise."}]}]}
    for path, body in (("/v1/messages", anthropic_body), ("/v1/responses", responses_body)):
        for turn in range(2):
            status, ours, headers = call(arc_server.base, "POST", path, body)
            _, theirs, _ = call(plain_server.base, "POST", path, body)
            assert status == 200 and ours["arc"]["compactions"] == 0 and headers["X-ARC-Session"]
            if path == "/v1/messages":
                total = lambda usage: usage["input_tokens"] + usage.get("cache_read_input_tokens", 0) + \
                    usage.get("cache_creation_input_tokens", 0)
                assert total(ours["usage"]) == total(theirs["usage"]) == ours["arc"]["view_tokens"]
                assert ours["content"] == theirs["content"] and ours["stop_reason"] == theirs["stop_reason"]
                body = dict(body, messages=body["messages"] + [{"role": "assistant", "content": ours["content"]},
                                                               {"role": "user", "content": "Again."}])
            else:
                assert ours["usage"]["input_tokens"] == theirs["usage"]["input_tokens"] == ours["arc"]["view_tokens"]
                text = lambda answer: [part["text"] for item in answer["output"] if item["type"] == "message"
                                       for part in item["content"]]
                assert text(ours) == text(theirs) and ours["status"] == theirs["status"]
                body = dict(body, input=body["input"] + [{"role": "assistant", "content": "".join(text(ours))},
                                                         {"role": "user", "content": "Again."}])


def test_a_clients_max_tokens_is_granted_as_plain_vllm_grants_it_on_every_api(arc_server, plain_server):
    """A short chat asking 520 tokens (more than G_max, 512; each token more costs six decode
    steps, three APIs on two servers) gets what plain vLLM gives, on every API; and once ARC
    acts, the view leaves the asked room (up to a quarter of the window), never G_max alone."""
    model = model_of(arc_server)
    asks = {"/v1/chat/completions": {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 520},
            "/v1/messages": {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 520},
            "/v1/responses": {"input": "hi", "max_output_tokens": 520}}
    length = {"/v1/chat/completions": lambda answer: answer["usage"]["completion_tokens"],
              "/v1/messages": lambda answer: answer["usage"]["output_tokens"],
              "/v1/responses": lambda answer: answer["usage"]["output_tokens"]}
    for path, body in asks.items():
        body = dict(body, model=model, temperature=0)
        _, ours, _ = call(arc_server.base, "POST", path, body)
        _, theirs, _ = call(plain_server.base, "POST", path, body)
        assert length[path](ours) == length[path](theirs) > 512, path
        assert ours["arc"]["max_tokens"] == 520 and ours["arc"]["max_tokens_asked"] == 520
    # A conversation ARC must compact: the view leaves min(1500, 25% of 4,096) = 1,024 tokens.
    # The answer is held to a few tokens (structured outputs): what is checked is the room ARC
    # grants, and the engine's keeping to a grant is checked above (the tiny model fills any
    # room it gets: 1,024 tokens more to decode, a quarter of this test's time).
    messages = [{"role": "user", "content": "Read the logs."}]
    for index in range(6):
        messages += [{"role": "assistant", "content": f"cat log{index}"}, {"role": "user", "content": log(index)}]
    _, ours, _ = call(arc_server.base, "POST", "/v1/chat/completions",
                      {"model": model, "messages": messages, "max_tokens": 1500, "temperature": 0,
                       "structured_outputs": {"choice": ["done"]}})
    arc = ours["arc"]
    assert arc["compactions"] >= 1 and arc["view_tokens"] <= 4096 - 1024
    assert arc["max_tokens"] == min(1500, 4096 - arc["view_tokens"]) >= 1024
    assert ours["choices"][0]["message"]["content"] == "done" and ours["usage"]["completion_tokens"] <= arc["max_tokens"]


def test_interleaved_conversations_of_two_callers_never_mix(arc_server):
    """Two callers (API keys) each with two conversations on each new API, requests in a random
    interleaving, conversations byte-identical across callers: four sessions per API, each
    holding only its own observations."""
    model = model_of(arc_server)
    rng = random.Random(7)
    plan = [(api, caller, conversation, turn) for api in ("messages", "responses") for caller in ("k1", "k2")
            for conversation in ("x", "y") for turn in range(4)]
    rng.shuffle(plan)
    plan.sort(key=lambda step: step[3])  # each conversation's turns in order, interleaved with the others
    histories, sessions = {}, {}
    for api, caller, conversation, turn in plan:
        key = (api, caller, conversation)
        secret = f"SECRET {caller} {conversation} {turn}\n" * 30
        if api == "messages":
            history = histories.setdefault(key, [{"role": "user", "content": f"task {conversation}"}])
            history += [{"role": "assistant", "content": [{"type": "tool_use", "id": f"t{turn}", "name": "cat", "input": {"n": turn}}]},
                        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{turn}", "content": secret}]}]
            status, answer, _ = call(arc_server.base, "POST", "/v1/messages",
                                     {"model": model, "max_tokens": 4, "tools": TOOLS, "messages": history},
                                     headers={"x-api-key": caller})
            history.append({"role": "assistant", "content": answer["content"]})
            history.append({"role": "user", "content": "next"})
        else:
            history = histories.setdefault(key, [{"role": "user", "content": f"task {conversation}"}])
            history += [{"type": "function_call", "call_id": f"c{turn}", "name": "cat", "arguments": json.dumps({"n": turn})},
                        {"type": "function_call_output", "call_id": f"c{turn}", "output": secret}]
            status, answer, _ = call(arc_server.base, "POST", "/v1/responses",
                                     {"model": model, "max_output_tokens": 4, "input": history, "store": False},
                                     headers={"Authorization": f"Bearer {caller}"})
            history.append({"role": "assistant", "content": "ok"})
        assert status == 200, answer
        sessions.setdefault(key, set()).add(answer["arc"]["session"])
    assert all(len(ids) == 1 for ids in sessions.values()) and len({next(iter(ids)) for ids in sessions.values()}) == 8
    for (api, caller, conversation), ids in sessions.items():
        sid = next(iter(ids))
        found = call(arc_server.base, "GET", f"/v1/arc/sessions/{sid}/search?q=SECRET")[1]["results"]
        assert len(found) == 4 and all(f"SECRET {caller} {conversation}" in record["snippet"] for record in found)


def test_a_rewritten_history_under_the_clients_id_continues_its_session(arc_server):
    """Claude Code's own /compact: the same session id and system prompt, the history replaced
    by a summary. The session continues (one rebase), everything stored before stays
    recallable, and a side request under the same id with another system prompt is a session
    of its own."""
    model = model_of(arc_server)
    headers = {"x-api-key": "k", "X-Claude-Code-Session-Id": "cc-rewrite"}
    history = [{"role": "user", "content": "Fix the bug."}]
    stored = {}
    for index in range(4):
        body = log(index, 30)
        history += [{"role": "assistant", "content": [{"type": "tool_use", "id": f"t{index}", "name": "cat", "input": {"i": index}}]},
                    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{index}", "content": body}]}]
        stored[visible_id(f"cat({json.dumps({'i': index})})", body)] = body
        _, first, _ = call(arc_server.base, "POST", "/v1/messages", {"model": model, "max_tokens": 4, "system": "Agent.",
                                                                     "messages": history, "tools": TOOLS}, headers=headers)
    sid = first["arc"]["session"]
    compacted = [{"role": "user", "content": "This session continues from a summary: logs 0-3 were read."}]
    _, after, _ = call(arc_server.base, "POST", "/v1/messages", {"model": model, "max_tokens": 4, "system": "Agent.",
                                                                 "messages": compacted, "tools": TOOLS}, headers=headers)
    assert after["arc"]["session"] == sid
    info = call(arc_server.base, "GET", f"/v1/arc/sessions/{sid}")[1]
    assert info["rebases"] == 1 and info["client_id"] == "cc-rewrite" and stored_exactly(arc_server, sid, stored) == 4
    _, side, _ = call(arc_server.base, "POST", "/v1/messages", {"model": model, "max_tokens": 4, "system": "Write a title.",
                                                                "messages": compacted}, headers=headers)
    assert side["arc"]["session"] != sid


def test_count_tokens_answers_for_the_view_arc_would_send(arc_server, plain_server):
    model = model_of(arc_server)
    short = {"model": model, "system": "Agent.", "messages": [{"role": "user", "content": "hi"}]}
    status, ours, _ = call(arc_server.base, "POST", "/v1/messages/count_tokens", short)
    assert status == 200 and ours == call(plain_server.base, "POST", "/v1/messages/count_tokens", short)[1]
    messages = [{"role": "user", "content": "Read the logs."}]
    for index in range(8):
        messages += [{"role": "assistant", "content": [{"type": "tool_use", "id": f"t{index}", "name": "cat", "input": {}}]},
                     {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{index}", "content": log(index)}]}]
    status, counted, _ = call(arc_server.base, "POST", "/v1/messages/count_tokens",
                              {"model": model, "messages": messages, "tools": TOOLS})
    assert status == 200 and counted["input_tokens"] <= 4096 - 512 < counted["context_management"]["original_input_tokens"]
    sessions = call(arc_server.base, "GET", "/v1/arc/sessions")[1]["sessions"]
    status, _, _ = call(arc_server.base, "POST", "/v1/messages", {"model": model, "max_tokens": 4, "messages": messages,
                                                                   "tools": TOOLS, "vllm_xargs": {"arc_debug": True}})
    assert status == 200 and len(call(arc_server.base, "GET", "/v1/arc/sessions")[1]["sessions"]) == len(sessions) + 1


BAD_MESSAGES = [
    b"{not json",
    {"model": "m"},
    {"model": "m", "max_tokens": 4, "messages": "hi"},
    {"model": "m", "max_tokens": 4, "messages": [{"role": "user"}]},
    {"model": "m", "max_tokens": 4, "messages": [{"role": "user", "content": [{"text": "no type"}]}]},
    {"model": "m", "max_tokens": 4, "messages": [{"role": "user", "content": [{"type": "nonsense", "x": 1}]}]},
    {"model": "m", "max_tokens": 4, "messages": [{"role": "wizard", "content": "hi"}]},
    {"model": "m", "max_tokens": -1, "messages": [{"role": "user", "content": "hi"}]},
    {"model": "m", "max_tokens": 4, "thinking": {"type": "sometimes"}, "messages": [{"role": "user", "content": "hi"}]},
    {"model": "m", "max_tokens": 4, "messages": [{"role": "user", "content": [
        {"type": "tool_result", "content": "orphan result, no tool_use_id"}]}]},
    {"model": "m", "max_tokens": 4, "messages": [{"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "nobody", "content": [{"type": "text", "text": 5}]}]}]},
]
BAD_RESPONSES = [
    b"[1, 2",
    {"model": "m", "input": 5},
    {"model": "m", "input": [{"type": "spaceship", "call_id": "x"}]},
    {"model": "m", "input": [{"type": "reasoning", "id": "r", "summary": [], "encrypted_content": "opaque"}]},
    {"model": "m", "input": "hi", "max_output_tokens": "many"},
    {"model": "m", "input": "hi", "previous_response_id": "resp_sess_0123456789abcdef01234567_9_ab"},
    {"model": "m", "input": "hi", "tools": [{"type": "function"}]},
    {"model": "m", "input": [{"type": "function_call_output", "output": "orphan"}]},
]


@pytest.mark.parametrize("path, bodies", [("/v1/messages", BAD_MESSAGES), ("/v1/responses", BAD_RESPONSES)])
def test_bad_bodies_get_clear_4xx_and_nothing_stored_is_lost(arc_server, path, bodies):
    model = model_of(arc_server)
    if path == "/v1/messages":
        good = {"model": model, "max_tokens": 4, "messages": [
            {"role": "user", "content": "task"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "cat", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "kept\n"}]}]}
    else:
        good = {"model": model, "max_output_tokens": 4, "input": [
            {"role": "user", "content": "task"},
            {"type": "function_call", "call_id": "c", "name": "cat", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c", "output": "kept\n"}]}
    status, answer, _ = call(arc_server.base, "POST", path, good)
    sid = answer["arc"]["session"]
    before = call(arc_server.base, "GET", f"/v1/arc/sessions/{sid}")[1]
    for bad in bodies:
        for headers in ({}, {"X-ARC-Session": sid}):  # with no session named, and in the session
            raw = bad if isinstance(bad, bytes) else json.dumps({**bad, "model": model}).encode()
            status, error, _ = call(arc_server.base, "POST", path, raw=raw, headers=headers)
            assert 400 <= status < 500, (bad, headers, status, error)
            message = error["error"]["message"] if isinstance(error, dict) else error
            assert message and "Traceback" not in str(message), (bad, error)
            if path == "/v1/messages" and isinstance(error, dict) and headers:
                assert error.get("type") == "error", (bad, error)  # Anthropic's error form
    after = call(arc_server.base, "GET", f"/v1/arc/sessions/{sid}")[1]
    assert after["observations"] == before["observations"] == 1
    assert call(arc_server.base, "GET", f"/v1/arc/sessions/{sid}/search?q=kept")[1]["results"]
