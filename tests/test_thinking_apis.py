"""A reasoning model's thinking through ARC on every API, streamed and not, against a real vLLM
reasoning parser and chat template: the tiny reasoning model (DeepSeek-R1's tokenizer from its
GGUF header, random weights) served with Qwen3's template, ``--reasoning-parser qwen3`` and
``--tool-call-parser hermes``; what it says is forced token by token where a test needs it to
think and then call a tool (``tests/helpers/short_answers.py``).

- random tool loops with thinking on random turns (chat ``reasoning``, Anthropic ``thinking``
  blocks with signatures, Responses ``reasoning`` items) and the user speaking at random steps,
  in an 8k session: in every view K <= L, every thought of the current loop whole or by its id,
  the newest turn's whole; at the end every thought comes back exactly by its id;
- the in-server recall loop with a reasoning model: it thinks, then calls ``_recall``; ARC serves
  it, and the next pass sees the recalled text and the recall step's thinking (in the prompt the
  template renders); the client gets the reasoning as vLLM gives it on its API and never ARC's
  tool call;
- Claude Code's recorded first request with its ``thinking`` left in succeeds; Codex's reasoning
  items, echoed back as Codex does, are kept in the session.
"""

import json
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st
from transformers import AutoTokenizer

from arc_vllm.core.formats import THINKING_SIGNATURE
from arc_vllm.core.tokens import HFTokenCounter

from tests.helpers.api_calls import call, log, model_of, stored_exactly
from tests.helpers.api_conversations import Conversation, arc_of, stream_data
from tests.helpers.conversations import visible_id

pytestmark = pytest.mark.slow
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "clients"
WINDOW = 8192


def thought(number: int, length: int) -> str:
    words = f"THOUGHT-{number}: the failing request is in log {number}; next I compare its latency. "
    return (words * (length // len(words) + 1))[:length]


def session_of(server, **budgets) -> dict:
    """An ARC session of its own (its window 8k: the server's is 32k), named in a header."""
    status, session, _ = call(server.base, "POST", "/v1/arc/sessions", {"budgets": {"context_window": WINDOW, **budgets}})
    assert status == 201, session
    return {"X-ARC-Session": session["id"]}


def shown(view: list[dict], text: str, id: str) -> str | None:
    if any(message.get("reasoning") == text for message in view):
        return "whole"
    return "id" if f"§{id}" in json.dumps(view, ensure_ascii=False) else None


steps = st.lists(st.one_of(
    st.tuples(st.just("tool"), st.integers(20, 160), st.one_of(st.none(), st.integers(40, 400), st.integers(400, 1_600))),
    st.tuples(st.just("said"), st.integers(10, 300), st.one_of(st.none(), st.integers(40, 400)))),
    min_size=8, max_size=16)


@pytest.mark.parametrize("api", ["chat", "messages", "responses"])
@settings(max_examples=6, deadline=None)
@given(history=steps, streamed=st.lists(st.booleans(), min_size=16, max_size=16))
def test_the_loops_thinking_stays_in_every_view_on_every_api(reasoning_server, reasoning_counter, api, history,
                                                             streamed):
    conversation = Conversation(api, model_of(reasoning_server))
    headers = session_of(reasoning_server)
    thoughts, stored, compactions = [], {}, 0  # thoughts: (text, id, after the user's newest message)
    for index, event in enumerate(history):
        reasoning = None if event[2] is None else thought(len(thoughts), event[2])
        if event[0] == "said":
            conversation.said(f"HUMAN-{index}: " + "keep the API stable " * (event[1] // 20 + 1), reasoning, index)
            thoughts = [(text, id, False) for text, id, _ in thoughts]  # the loop ends where the user speaks
            if reasoning is not None:  # the assistant's answer before the user spoke: the loop that ended
                thoughts.append((reasoning, visible_id(THINKING_SIGNATURE, reasoning), False))
        else:
            body = log(index, event[1])
            conversation.tool(index, body, reasoning=reasoning)
            stored[visible_id(f'cat({json.dumps({"path": f"log{index}"})})', body)] = body
            if reasoning is not None:
                thoughts.append((reasoning, visible_id(THINKING_SIGNATURE, reasoning), True))
        if reasoning is not None:
            stored[visible_id(THINKING_SIGNATURE, reasoning)] = reasoning
        path, body, own = conversation.request(streamed[index])
        arc = arc_of(reasoning_server.base, path, body, {**own, **headers})
        assert arc["view_tokens"] <= arc["budget_tokens"] == WINDOW - 512
        for view in arc["views"]:
            assert reasoning_counter.count_messages(view) <= arc["budget_tokens"]
        view = arc["views"][-1]
        compactions += arc["compactions"]
        for number, (text, id, in_loop) in enumerate(thoughts):
            if in_loop:
                assert shown(view, text, id) is not None, f"the loop's thought {number} left the view"
        if event[0] == "tool" and reasoning is not None:
            assert shown(view, reasoning, visible_id(THINKING_SIGNATURE, reasoning)) == "whole"
    sid = headers["X-ARC-Session"]
    if arc["conversation_tokens"] > 2 * arc["budget_tokens"]:
        assert compactions > 0  # ARC had to act, and the loop's thinking held through it
    assert stored_exactly(reasoning_server, sid, stored) == len(stored)


def forced(tokenizer, text: str) -> list[int]:
    return tokenizer.encode(text, add_special_tokens=False) + [tokenizer.eos_token_id]


def answer_of(base: str, api: str, path: str, body: dict, headers: dict) -> tuple[dict, str, list[str]]:
    """The ``arc`` object, the reasoning the client got and the names of the tools it was asked to
    call, read from the answer as each API's client reads it, streamed or not."""
    if not body["stream"]:
        status, answer, _ = call(base, "POST", path, body, headers)
        assert status == 200, answer
        if api == "chat":
            message = answer["choices"][0]["message"]
            return answer["arc"], message.get("reasoning") or "", [c["function"]["name"] for c in message.get("tool_calls") or []]
        if api == "messages":
            blocks = answer["content"]
            return (answer["arc"], "".join(block["thinking"] for block in blocks if block["type"] == "thinking"),
                    [block["name"] for block in blocks if block["type"] == "tool_use"])
        items = answer["output"]
        return (answer["arc"], "".join(part["text"] for item in items if item["type"] == "reasoning"
                                       for part in item.get("content") or []),
                [item["name"] for item in items if item["type"] == "function_call"])
    data = stream_data(base, path, body, headers)
    arc = next(event.get("arc") or (event.get("response") or {}).get("arc") for event in reversed(data)
               if event.get("arc") or (event.get("response") or {}).get("arc"))
    if api == "chat":
        deltas = [choice["delta"] for event in data for choice in event.get("choices") or []]
        return (arc, "".join(delta.get("reasoning") or "" for delta in deltas),
                [call["function"]["name"] for delta in deltas for call in delta.get("tool_calls") or []
                 if (call.get("function") or {}).get("name")])
    if api == "messages":
        return (arc, "".join(event["delta"].get("thinking", "") for event in data if event["type"] == "content_block_delta"),
                [event["content_block"]["name"] for event in data if event["type"] == "content_block_start"
                 and event["content_block"]["type"] == "tool_use"])
    return (arc, "".join(event["delta"] for event in data if event["type"] == "response.reasoning_text.delta"),
            [event["item"]["name"] for event in data if event["type"] == "response.output_item.added"
             and event["item"]["type"] == "function_call"])


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("api", ["chat", "messages", "responses"])
@pytest.mark.parametrize("format", [pytest.param("qwen3", marks=pytest.mark.server("reasoning")),
                                    pytest.param("r1", marks=pytest.mark.server("r1"))])
def test_a_reasoning_model_recalls_inside_the_server_and_sees_its_own_thinking(request, format, api, stream):
    """Qwen3's format renders the current loop's thinking into the prompt; DeepSeek-R1's template
    drops every earlier turn's thinking (the view still holds it, stored under its id)."""
    reasoning_server = request.getfixturevalue("reasoning_server" if format == "qwen3" else "r1_server")
    counter = HFTokenCounter(model_of(reasoning_server))
    model = model_of(reasoning_server)
    tokenizer = AutoTokenizer.from_pretrained(model)
    conversation = Conversation(api, model)
    headers = session_of(reasoning_server, recalls_per_step=1)
    for index in range(10):  # (the first short enough to come back in one piece)
        conversation.tool(index, log(index, 40 if index == 0 else 100), reasoning=thought(index, 300))
    path, body, own = conversation.request(False)
    assert arc_of(reasoning_server.base, path, body, {**own, **headers})["compactions"] > 0  # ARC's tools offered
    oid = visible_id('cat({"path": "log0"})', log(0, 40))
    said = ('<think>\nRECALL-THOUGHT: the first log had the failing request.\n</think>\n\n'
            '<tool_call>\n{"name": "_recall", "arguments": {"id": "§%s"}}\n</tool_call>' % oid)
    path, body, own = conversation.request(stream, max_tokens=300, vllm_xargs={"arc_test_forced": forced(tokenizer, said)})
    arc, reasoning, calls = answer_of(reasoning_server.base, api, path, body, {**own, **headers})
    assert arc["commands_served"] == 1 and arc["recalls"] == 1 and arc["engine_calls"] == 2
    # The second pass saw the recalled text and the recall step's thinking, rendered by the template.
    second = arc["views"][-1]
    [step] = [message for message in second if "RECALL-THOUGHT" in (message.get("reasoning") or "")]
    assert step["tool_calls"][0]["function"]["name"] == "_recall"
    assert any(message["role"] == "tool" and log(0, 40) in message["content"] for message in second)
    prompt = counter.render(second)
    assert ("<think>\nRECALL-THOUGHT: the first log had the failing request.\n</think>" in prompt) == (format == "qwen3")
    # The client gets the reasoning of both passes, as each API gives reasoning, and no ARC call.
    assert reasoning.count("RECALL-THOUGHT") == 2 and "_recall" not in calls
    # The recall step's thought is stored, and comes back exactly by its id.
    text = step["reasoning"]
    assert call(reasoning_server.base, "GET",
                f"/v1/arc/sessions/{headers['X-ARC-Session']}/observations/{visible_id(THINKING_SIGNATURE, text)}")[1] == text


@pytest.mark.parametrize("thinking", [None, {"type": "enabled", "budget_tokens": 2048}], ids=["as-recorded", "enabled"])
def test_claude_codes_first_request_with_its_thinking_is_answered(reasoning_server, thinking):
    """Claude Code sends ``thinking`` on every request (2.1.328: ``adaptive``; a budget where it is
    enabled): with a reasoning parser it is served as plain vLLM serves it, through ARC."""
    recorded = json.loads((FIXTURES / "claude_code_first_request.json").read_text())
    body, headers = recorded["body"], {"x-api-key": "local", **recorded["headers"]}
    body["model"] = model_of(reasoning_server)
    if thinking is not None:
        body["thinking"] = thinking
    data = stream_data(reasoning_server.base, "/v1/messages?beta=true", body, headers)
    kinds = [event["type"] for event in data]
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
    [delta] = [event for event in data if event["type"] == "message_delta"]
    assert delta["arc"]["session"] and delta["arc"]["view_tokens"] <= delta["arc"]["budget_tokens"]


def test_codex_echoes_its_reasoning_items_and_the_session_keeps_them(reasoning_server):
    """Codex's recorded first request; the model thinks, then calls exec_command; Codex echoes the
    output items (the reasoning item as it got it) with the call's output: one session, the
    thought stored exactly and in the next view, whole (the loop the model is in)."""
    recorded = json.loads((FIXTURES / "codex_first_request.json").read_text())
    body, headers = recorded["body"], {"Authorization": "Bearer local", **recorded["headers"]}
    model = body["model"] = model_of(reasoning_server)
    tokenizer = AutoTokenizer.from_pretrained(model)
    said = ('<think>\nCODEX-THOUGHT: list the files first.\n</think>\n\n'
            '<tool_call>\n{"name": "exec_command", "arguments": {"cmd": "ls"}}\n</tool_call>')
    first = stream_data(reasoning_server.base, "/v1/responses",
                        dict(body, vllm_xargs={"arc_test_forced": forced(tokenizer, said)}), headers)
    response = first[-1]["response"]
    items = response["output"]
    kinds = [item["type"] for item in items]
    assert kinds[0] == "reasoning" and "function_call" in kinds
    text = items[0]["content"][0]["text"]
    assert "CODEX-THOUGHT" in text
    [call_item] = [item for item in items if item["type"] == "function_call"]
    body["input"] += items + [{"type": "function_call_output", "call_id": call_item["call_id"], "output": "README.md\nsrc\n"}]
    second = stream_data(reasoning_server.base, "/v1/responses", dict(body, vllm_xargs={"arc_debug": True}), headers)
    arc = second[-1]["response"]["arc"]
    assert arc["session"] == response["arc"]["session"]
    view = arc["views"][-1]
    assert any(message.get("reasoning") == text for message in view)
    id = visible_id(THINKING_SIGNATURE, text)
    assert call(reasoning_server.base, "GET", f"/v1/arc/sessions/{arc['session']}/observations/{id}")[1] == text


def test_without_a_reasoning_parser_a_budgeted_thinking_is_a_400_as_plain_vllm_gives(arc_server, plain_server):
    """Why a server for Claude Code needs ``--reasoning-parser``: without one vLLM refuses a
    budgeted ``thinking`` (its engine raises it), and ARC answers as vLLM does, in Anthropic's
    error form; streamed too (where plain vLLM 0.32 sends a 200 with an ``internal_error`` event)."""
    for server, streams in ((plain_server, (False,)), (arc_server, (False, True))):
        for stream in streams:
            status, answer, _ = call(server.base, "POST", "/v1/messages", {
                "model": model_of(server), "max_tokens": 2048, "thinking": {"type": "enabled", "budget_tokens": 1024},
                "messages": [{"role": "user", "content": "hi"}], "stream": stream})
            assert status == 400 and answer["type"] == "error" and "--reasoning-parser" in answer["error"]["message"], \
                (server.base, stream, answer)
