"""Compaction owned by ARC on every API, with the real SDKs (``openai``, ``anthropic``)
against a real server on the tiny model (4,096 tokens):

- a client's own compaction turn (Codex's prompt, Claude Code's) is answered from the store
  with no model call, its prompt never archived; the rewritten history that keeps ARC's
  handoff continues the same session, with ARC's view (the note, the catalog) from then on;
- ``responses.compact``, ``context_management`` on ``responses.create`` (streamed and not) and
  a ``compaction_trigger`` item answer with ARC's compaction item; a later request carrying it
  continues the session with only what is new: every view within the budget, every
  observation stored exactly, the request after a compaction much smaller than the
  conversation;
- Anthropic ``compact_20260112`` (paused and not, streamed and not), ``clear_tool_uses`` as
  citation with ``applied_edits``, a ``compaction`` block continuing the session;
- a forged handle (400), another caller's (404), a stale one (409), an unknown edit (400).
"""

import json
import re

import anthropic
import pytest
from openai import APIStatusError, OpenAI

from tests.helpers.api_calls import call, log, model_of
from tests.helpers.conversations import visible_id

pytestmark = pytest.mark.slow
CODEX_PROMPT = ("You are performing a CONTEXT CHECKPOINT COMPACTION. Create a handoff summary for another LLM "
                "that will resume the task.")
R_TOOLS = [{"type": "function", "name": "cat", "description": "Read a file.",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}]
A_TOOLS = [{"name": "cat", "description": "Read a file.",
            "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}}]


def responses_turn(index: int, lines: int = 60) -> list[dict]:
    return [{"type": "function_call", "call_id": f"c{index}", "name": "cat",
             "arguments": json.dumps({"path": f"f{index}.log"})},
            {"type": "function_call_output", "call_id": f"c{index}", "output": log(index, lines)}]


def session_of(server, sid):
    return call(server.base, "GET", f"/v1/arc/sessions/{sid}")[1]


def all_stored(server, sid, count: int, lines: int = 60) -> bool:
    """Every observation the test sent is stored exactly (logs 0..count-1)."""
    hits = call(server.base, "GET", f"/v1/arc/sessions/{sid}/search?q=line%200%3A&limit=1000")[1]["results"]
    bodies = {call(server.base, "GET", f"/v1/arc/sessions/{sid}/observations/{hit['id']}")[1] for hit in hits}
    return all(log(index, lines) in bodies for index in range(count))


def test_a_codex_compaction_turn_is_answered_from_the_store_and_the_session_goes_on(arc_server):
    model = model_of(arc_server)
    messages = [{"role": "system", "content": "You are Codex."}, {"role": "user", "content": "Fix the build."}]
    tools = [{"type": "function", "function": {key: R_TOOLS[0][key] for key in ("name", "description", "parameters")}}]
    for index in range(6):
        messages += [{"role": "assistant", "content": "", "tool_calls": [
                         {"id": f"c{index}", "type": "function",
                          "function": {"name": "cat", "arguments": json.dumps({"path": f"f{index}.log"})}}]},
                     {"role": "tool", "tool_call_id": f"c{index}", "content": log(index, 30)}]
    status, first, _ = call(arc_server.base, "POST", "/v1/chat/completions",
                            {"model": model, "messages": messages, "max_tokens": 4, "tools": tools})
    sid = first["arc"]["session"]
    ask = messages + [{"role": "user", "content": CODEX_PROMPT}]
    status, answer, _ = call(arc_server.base, "POST", "/v1/chat/completions",
                             {"model": model, "messages": ask, "max_tokens": 300, "tools": tools, "stream": False})
    assert status == 200 and answer["arc"]["session"] == sid
    record = answer["arc"]["client_compaction"]
    assert record["client"] == "codex" and record["decoded_tokens"] == 0 and answer["arc"]["engine_calls"] == 0
    handoff = answer["choices"][0]["message"]["content"]
    assert handoff.startswith("[ARC handoff") and "[ARC handle arc1." in handoff and "Fix the build." in handoff
    assert call(arc_server.base, "GET", f"/v1/arc/sessions/{sid}/search?q=CONTEXT%20CHECKPOINT")[1]["results"] == []
    # Codex's next history: the user messages, then the summary, then the new prompt.
    rewritten = messages[:2] + [{"role": "user", "content": "Another language model started ...\n" + handoff},
                                {"role": "user", "content": "Go on."}]
    status, after, _ = call(arc_server.base, "POST", "/v1/chat/completions",
                            {"model": model, "messages": rewritten, "max_tokens": 4, "tools": tools})
    assert status == 200 and after["arc"]["session"] == sid
    view = call(arc_server.base, "GET", f"/v1/arc/sessions/{sid}/view")[1]
    assert view["compacted"] and view["tokens"] <= view["budget_tokens"]
    assert all_stored(arc_server, sid, 6, 30)
    # Every observation comes back exactly through the model-facing command, from the view
    # after the compaction (the model is made to say it: structured outputs).
    for index in range(6):
        id = visible_id("cat(" + json.dumps({"path": f"f{index}.log"}) + ")", log(index, 30))
        recalled = call(arc_server.base, "POST", "/v1/chat/completions", {
            "model": model, "messages": rewritten, "max_tokens": 16, "tools": tools,
            "structured_outputs": {"choice": [f"_recall §{id}"]}, "vllm_xargs": {"arc_debug": 1}})[1]
        assert recalled["arc"]["session"] == sid and recalled["arc"]["recalls"] >= 1
        later = "\n".join(message["content"] or "" for message in recalled["arc"]["views"][1])
        assert log(index, 30) in later
    # ...and as a tool call (the hermes form the server parses), answered by a tool message.
    call_text = f'<tool_call>\n{{"name": "_recall", "arguments": {{"id": "§{id}"}}}}\n</tool_call>'
    recalled = call(arc_server.base, "POST", "/v1/chat/completions", {
        "model": model, "messages": rewritten, "max_tokens": 100, "tools": tools,
        "structured_outputs": {"regex": re.escape(call_text)}, "vllm_xargs": {"arc_debug": 1}})[1]
    assert recalled["arc"]["recalls"] >= 1 and not recalled["choices"][0]["message"].get("tool_calls")
    tool_results = [message for message in recalled["arc"]["views"][1] if message["role"] == "tool"]
    assert any(message["content"] == log(5, 30) or log(5, 30) in message["content"] for message in tool_results)
    # Streamed, a second compaction: the same answer's form, no engine call.
    events = call(arc_server.base, "POST", "/v1/chat/completions",
                  {"model": model, "messages": rewritten + [{"role": "user", "content": CODEX_PROMPT}],
                   "stream": True, "stream_options": {"include_usage": True}, "tools": tools})[1]
    chunks = [json.loads(line[6:]) for line in events.splitlines() if line.startswith("data: {")]
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"]).startswith("[ARC handoff")
    assert chunks[-1]["arc"]["client_compaction"]["decoded_tokens"] == 0 and session_of(arc_server, sid)["handoffs"] == 2


def test_responses_compaction_keeps_every_observation_and_requests_small(arc_server):
    client = OpenAI(base_url=arc_server.base + "/v1", api_key="caller-compact", max_retries=0)
    model = model_of(arc_server)
    held, sid, sizes, count = [{"role": "user", "content": "Read every log."}], None, [], 0
    for window in range(3):  # three windows long, compacting once per window
        for _ in range(4):
            held += responses_turn(count)
            count += 1
            body = json.dumps(held)
            response = client.responses.create(model=model, input=held, instructions="You read logs.",
                                               max_output_tokens=4, tools=R_TOOLS)
            arc = response.model_extra["arc"]
            sid = sid or arc["session"]
            assert arc["session"] == sid and arc["view_tokens"] <= arc["budget_tokens"]
            sizes.append(len(body))
            held += [item.model_dump(exclude_none=True) for item in response.output
                     if item.type == "function_call"]
        compacted = client.responses.compact(model=model, input=held, instructions="You read logs.")
        assert compacted.object == "response.compaction" and compacted.output[-1].type == "compaction"
        assert compacted.model_extra["arc"]["compaction"]["decoded_tokens"] == 0
        users = [item for item in compacted.output if item.type == "message"]
        assert users and all(item.role == "user" and item.status == "completed" and item.id for item in users)
        assert len({item.id for item in users}) == len(users)  # complete output items (Open Responses)
        held = [item.model_dump(exclude_none=True) for item in compacted.output]
    conversation = sum(len(json.dumps(responses_turn(index))) for index in range(count))
    assert sizes[-1] < conversation / 2  # the client sends the handle and what is new
    assert all_stored(arc_server, sid, count)
    info = session_of(arc_server, sid)
    assert info["handoffs"] == 3 and info["observations"] >= count

    # context_management: a compaction item leads the output once past the threshold.
    management = {"context_management": [{"type": "compaction", "compact_threshold": 200}]}
    response = client.responses.create(model=model, input=held + [{"role": "user", "content": "Next?"}],
                                       max_output_tokens=4, extra_body=management)
    assert response.output[0].type == "compaction" and response.model_extra["arc"]["session"] == sid
    with client.responses.stream(model=model, input=held + [{"role": "user", "content": "Next?"}],
                                 max_output_tokens=4, extra_body=management) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_response()
    assert final.output[0].type == "compaction" and kinds[:4] == ["response.created", "response.in_progress",
                                                                   "response.output_item.added",
                                                                   "response.output_item.done"]
    # Codex's remote compaction: exactly one compaction item.
    trigger = client.responses.create(model=model, input=held + [{"type": "compaction_trigger"}],
                                      max_output_tokens=4)
    assert [item.type for item in trigger.output] == ["compaction"] and trigger.usage.output_tokens == 0

    # A forged handle, another caller's, a stale one.
    handle = held[-1]["encrypted_content"]
    with pytest.raises(APIStatusError) as forged:
        client.responses.create(model=model, max_output_tokens=4, input=[
            {"type": "compaction", "encrypted_content": handle[:-4] + "AAAA"}, {"role": "user", "content": "x"}])
    assert forged.value.status_code == 400 and "signature" in str(forged.value)
    other = OpenAI(base_url=arc_server.base + "/v1", api_key="another-caller", max_retries=0)
    with pytest.raises(APIStatusError) as foreign:
        other.responses.create(model=model, max_output_tokens=4, input=held + [{"role": "user", "content": "x"}])
    assert foreign.value.status_code == 404
    assert all_stored(arc_server, sid, count)


def test_a_stale_handle_is_a_409(arc_server):
    model = model_of(arc_server)
    sid = call(arc_server.base, "POST", "/v1/arc/sessions", {})[1]["id"]
    named = {"X-ARC-Session": sid}
    client = OpenAI(base_url=arc_server.base + "/v1", api_key="caller-stale", max_retries=0, default_headers=named)
    first = [{"role": "user", "content": "Read."}, *responses_turn(0)]
    compacted = client.responses.compact(model=model, input=first)
    # The client rewrites the history (the same first message, another second): the session
    # rebases, and the handle no longer stands for its history.
    client.responses.create(model=model, input=[first[0], *responses_turn(1)], max_output_tokens=4)
    with pytest.raises(APIStatusError) as stale:
        client.responses.create(model=model, max_output_tokens=4, input=[
            *[item.model_dump(exclude_none=True) for item in compacted.output], {"role": "user", "content": "x"}])
    assert stale.value.status_code == 409 and "stale" in str(stale.value)


def test_anthropic_context_management_compacts_and_clears_as_citation(arc_server):
    client = anthropic.Anthropic(base_url=arc_server.base, api_key="caller-edits", max_retries=0)
    model = model_of(arc_server)
    messages = [{"role": "user", "content": "Read the logs."}]
    for index in range(5):
        messages += [{"role": "assistant", "content": [{"type": "tool_use", "id": f"t{index}", "name": "cat",
                                                        "input": {"path": f"f{index}"}}]},
                     {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{index}",
                                                   "content": log(index, 40)}]}]
    clear = {"edits": [{"type": "clear_tool_uses_20250919", "trigger": {"type": "input_tokens", "value": 100},
                        "keep": {"type": "tool_uses", "value": 2}}]}
    cleared = client.beta.messages.create(model=model, max_tokens=4, messages=messages, tools=A_TOOLS,
                                          betas=["context-management-2025-06-27"], context_management=clear)
    [edit] = cleared.context_management.applied_edits
    assert edit.type == "clear_tool_uses_20250919" and edit.cleared_tool_uses == 3 and edit.cleared_input_tokens > 0
    sid = cleared.model_extra["arc"]["session"]
    view = call(arc_server.base, "GET", f"/v1/arc/sessions/{sid}/view")[1]
    assert len(view["stubs"]) >= 3  # cleared as citations, each recallable by its id
    # Streamed, with one more tool use: one more result cleared, reported on message_delta.
    messages += [{"role": "assistant", "content": [{"type": "tool_use", "id": "t5", "name": "cat",
                                                    "input": {"path": "f5"}}]},
                 {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t5", "content": log(5, 40)}]}]
    with client.beta.messages.stream(model=model, max_tokens=4, messages=messages, tools=A_TOOLS,
                                     betas=["context-management-2025-06-27"], context_management=clear) as stream:
        streamed = stream.get_final_message()
    [edit] = streamed.context_management.applied_edits
    assert edit.type == "clear_tool_uses_20250919" and edit.cleared_tool_uses == 1
    assert session_of(arc_server, sid)["requests"] == 2

    messages += [{"role": "assistant", "content": [{"type": "text", "text": "ok"}]},
                 {"role": "user", "content": "Continue."}]
    compact = {"edits": [{"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 500},
                          "pause_after_compaction": True}]}
    paused = client.beta.messages.create(model=model, max_tokens=4, messages=messages, tools=A_TOOLS,
                                         betas=["compact-2026-01-12"], context_management=compact)
    assert paused.stop_reason == "compaction" and [block.type for block in paused.content] == ["compaction"]
    assert paused.model_extra["arc"]["session"] == sid and paused.content[0].content.startswith("[ARC handoff")
    block = paused.content[0].model_dump(exclude_none=True)
    after = [{"role": "user", "content": "Read the logs."}, {"role": "assistant", "content": [block]},
             {"role": "user", "content": "Go on."}]
    late = {"edits": [{"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 60}}]}
    with client.beta.messages.stream(model=model, max_tokens=4, messages=after, tools=A_TOOLS,
                                     betas=["compact-2026-01-12"], context_management=late) as stream:
        final = stream.get_final_message()
    assert [block.type for block in final.content][:1] == ["compaction"] and final.stop_reason != "compaction"
    assert session_of(arc_server, sid)["handoffs"] == 2 and all_stored_anthropic(arc_server, sid)
    with pytest.raises(anthropic.BadRequestError, match="not supported"):
        client.beta.messages.create(model=model, max_tokens=4, messages=messages,
                                    context_management={"edits": [{"type": "clear_everything"}]})


def all_stored_anthropic(server, sid) -> bool:
    bodies = {call(server.base, "GET", f"/v1/arc/sessions/{sid}/observations/{hit['id']}")[1]
              for hit in call(server.base, "GET", f"/v1/arc/sessions/{sid}/search?q=line%200%3A")[1]["results"]}
    return all(log(index, 40) in bodies for index in range(5))


def test_models_say_what_arc_serves(arc_server):
    [card] = call(arc_server.base, "GET", "/v1/models")[1]["data"]
    assert card["max_model_len"] == 4096 and card["arc"]["context_window"] == 4096
    compaction = card["arc"]["compaction"]
    assert compaction["client_turns"] == "arc" and "POST /v1/responses/compact" in compaction["responses"]
    assert "compact_20260112" in compaction["anthropic_edits"] and compaction["handoff_tokens"] >= 256


def test_litellm_compact_responses_and_a_handle_of_a_session_gone(arc_server):
    import litellm

    model = model_of(arc_server)
    items = [{"role": "user", "content": "Read with litellm."}, *responses_turn(0), *responses_turn(1)]
    compacted = litellm.compact_responses(input=items, model=f"openai/{model}", api_base=arc_server.base + "/v1",
                                          api_key="caller-litellm")
    output = [item if isinstance(item, dict) else item.model_dump() for item in compacted.output]
    assert output[-1]["type"] == "compaction" and output[-1]["encrypted_content"].startswith("arc1.")
    # A handle whose session is gone (ended, or removed by retention): a 404 that says so.
    key = {"Authorization": "Bearer caller-gone"}
    items = [{"role": "user", "content": "Read, then end."}, *responses_turn(0)]
    status, answer, _ = call(arc_server.base, "POST", "/v1/responses/compact", {"model": model, "input": items}, key)
    assert status == 200
    assert call(arc_server.base, "DELETE", f"/v1/arc/sessions/{answer['arc']['session']}")[0] == 200
    status, error, _ = call(arc_server.base, "POST", "/v1/responses", {
        "model": model, "max_output_tokens": 4, "input": [answer["output"][-1], {"role": "user", "content": "x"}]}, key)
    assert status == 404 and "no longer held" in error["error"]["message"]


def test_anthropic_compaction_in_a_tool_loop_three_windows_long(arc_server):
    client = anthropic.Anthropic(base_url=arc_server.base, api_key="caller-loop", max_retries=0)
    model = model_of(arc_server)
    edits = {"edits": [{"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 2500}}]}
    messages, sid, sizes, compactions = [{"role": "user", "content": "Read the logs in a loop."}], None, [], 0
    for index in range(12):  # about three 4,096-token windows of observations
        messages += [{"role": "assistant", "content": [{"type": "tool_use", "id": f"t{index}", "name": "cat",
                                                        "input": {"path": f"f{index}"}}]},
                     {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{index}",
                                                   "content": log(index, 60)}]}]
        sizes.append(len(json.dumps(messages)))
        answer = client.beta.messages.create(model=model, max_tokens=4, messages=messages, tools=A_TOOLS,
                                             betas=["compact-2026-01-12"], context_management=edits)
        arc = answer.model_extra["arc"]
        sid = sid or arc["session"]
        assert arc["session"] == sid and arc["view_tokens"] <= arc["budget_tokens"]
        if answer.content and answer.content[0].type == "compaction":
            compactions += 1  # the client keeps the block (and drops what came before it)
            messages = [{"role": "assistant", "content": [answer.content[0].model_dump(exclude_none=True)]}]
        messages += [{"role": "user", "content": "go on"}] if messages[-1]["role"] == "assistant" else []
    assert compactions >= 2 and session_of(arc_server, sid)["handoffs"] == compactions
    assert max(sizes[-3:]) < sum(len(log(index, 60)) for index in range(12)) / 2
    bodies = {call(arc_server.base, "GET", f"/v1/arc/sessions/{sid}/observations/{hit['id']}")[1]
              for hit in call(arc_server.base, "GET", f"/v1/arc/sessions/{sid}/search?q=line%200%3A")[1]["results"]}
    assert all(log(index, 60) in bodies for index in range(12))


def test_a_compaction_answered_without_the_engine_says_its_store_time(keyed_server):
    """``arc.store_ms`` on every answered path: a Responses compaction (no engine call) on a
    server with a store folder reports the commit's time and round trips."""
    client = OpenAI(base_url=keyed_server.base + "/v1", api_key="key-a", max_retries=0)
    model = client.models.list().data[0].id
    held = [{"role": "user", "content": "Read every log."}] + responses_turn(0) + responses_turn(1)
    client.responses.create(model=model, input=held, max_output_tokens=2, tools=R_TOOLS)
    compacted = client.responses.compact(model=model, input=held)
    arc = compacted.model_extra["arc"]
    assert compacted.output[-1].type == "compaction" and arc["store_ms"] >= 0 and arc["store_round_trips"] >= 1
