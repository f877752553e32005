"""The ARC chat path without a server, for the one fault a real engine never shows here: the
engine refusing a view as too long (ARC's own bound prevents it), which must compact and retry.
The engine is a fake that answers like vLLM's chat handler; everything else is real."""

import asyncio
import json

import pytest

from vllm.entrypoints.generate.base.protocol import FunctionCall, ToolCall

from arc_vllm.core.errors import is_context_length_error
from arc_vllm.serving.step.chat import complete
from arc_vllm.serving.errors import EngineError, SessionError
from arc_vllm.serving.step.engine import ChatEngine
from arc_vllm.serving.sessions.manager import SessionManager
from tests.helpers.sessions import created
from tests.helpers.fake_engine import FakeEngine, Refusal, conversation


def test_context_length_refusal_compacts_and_retries(smol):
    manager = SessionManager(smol, 4096, {})
    session = created(manager)
    engine = FakeEngine(refusals=2)
    response = asyncio.run(complete({"messages": conversation(8)}, session, ChatEngine(engine)))
    arc = response["arc"]
    assert arc["reactive_retries"] == 2 and arc["engine_calls"] == 3
    assert arc["compactions"] >= 2 and response["choices"][0]["message"]["content"] == "done"
    # Each retry sent a smaller (or equal) view, and nothing stored was lost.
    sizes = arc["view_tokens_per_call"]
    assert sizes[1] <= sizes[0] and sizes[2] <= sizes[1]
    assert len(session.store) == 8 and arc["prefix_cached_tokens"] == 64


def tool_call(name, arguments):
    return ToolCall(id=f"t-{name}", function=FunctionCall(name=name, arguments=json.dumps(arguments)))


def test_until_arc_acts_the_prompt_is_the_clients_own(smol):
    """No compaction needed: the engine gets the client's messages and tools, exactly (no ARC
    note, no ARC tools), so the prompt is byte for byte plain vLLM's."""
    session = created(SessionManager(smol, 4096, {}))
    tools = [{"type": "function", "function": {"name": "cat"}}]
    messages = [{"role": "system", "content": "Be brief."}] + conversation(3)
    engine = FakeEngine(0)
    response = asyncio.run(complete({"messages": messages, "tools": tools}, session, ChatEngine(engine)))
    assert response["arc"]["compactions"] == 0
    [sent] = engine.requests
    assert [tool.function.name for tool in sent.tools] == ["cat"]
    assert sent.messages == messages


def test_several_choices_pass_through_until_arc_acts_then_get_a_clear_400(smol):
    session = created(SessionManager(smol, 4096, {}), {"context_window": 2048, "max_tokens": 256})
    engine = FakeEngine(0)
    asyncio.run(complete({"messages": conversation(2), "n": 2}, session, ChatEngine(engine)))
    assert engine.requests[0].n == 2
    with pytest.raises(SessionError, match="n: this session has been compacted") as refused:
        asyncio.run(complete({"messages": conversation(16), "n": 2}, session, ChatEngine(FakeEngine(0))))
    assert refused.value.status == 400 and len(session.store) == 16  # nothing lost


def test_arc_tool_calls_are_offered_and_served_inside(smol):
    """With tools in the request, ARC's tools are offered beside them once ARC has acted (its
    note then follows F), and a call to one of them is served here: the next view holds the
    exact stored text."""
    session = created(SessionManager(smol, 4096, {}), {"context_window": 2048, "max_tokens": 256})
    messages = conversation(16)
    body = {"messages": messages, "tools": [{"type": "function", "function": {"name": "cat"}}]}
    first = FakeEngine(0)
    assert asyncio.run(complete(body, session, ChatEngine(first)))["arc"]["compactions"] >= 1
    assert {tool.function.name for tool in first.requests[0].tools} == {"cat", "_recall", "_recall_meta", "_catalog"}
    view = first.requests[0].messages
    assert view[0] == messages[0] and "ARC manages this context" in view[1]["content"]
    id = session.store.ids()[0]
    engine = FakeEngine(0, tool_calls=[tool_call("_recall", {"id": id}),
                                       tool_call("_catalog", {"page": 1})])
    response = asyncio.run(complete(body, session, ChatEngine(engine)))
    offered = {tool.function.name for tool in engine.requests[0].tools}
    assert offered == {"cat", "_recall", "_recall_meta", "_catalog"}
    assert response["arc"]["commands_served"] == 2 and response["arc"]["recalls"] == 1
    # The model's own tool call, answered by a tool message holding the exact stored text.
    second = engine.requests[1].messages
    [answer] = [m for m in second if m["role"] == "tool" and m["tool_call_id"] == "t-_recall"]
    assert session.store.get(id).content in answer["content"]
    [call] = [m for m in second if m.get("tool_calls") and m["tool_calls"][0]["id"] == "t-_recall"]
    assert call["tool_calls"][0]["function"]["name"] == "_recall"
    assert response["choices"][0]["message"]["content"] == "done"


def test_a_refusal_that_persists_is_returned_not_looped(smol):
    manager = SessionManager(smol, 4096, {})
    session = created(manager)
    with pytest.raises(EngineError) as refused:
        asyncio.run(complete({"messages": conversation(2)}, session, ChatEngine(FakeEngine(refusals=99))))
    assert refused.value.status == 400
    assert "maximum context length" in refused.value.body["error"]["message"]
    assert len(session.store) == 2


def test_only_context_length_errors_trigger_compaction():
    assert is_context_length_error(Refusal(message="This model's maximum context length is 10"))
    assert not is_context_length_error(Refusal(message="temperature must be >= 0"))


def test_bad_bodies_are_refused_before_anything_is_stored(smol):
    session = created(SessionManager(smol, 4096, {}))
    for body, field in [({"messages": "x"}, "messages"), ({"messages": [{"content": "x"}]}, "messages\\[0\\]"),
                        ({"messages": [{"role": "user", "content": "x"}], "n": 0}, "n:"),
                        ({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, "text content"),
                        ({"messages": [{"role": "user", "content": "x"}], "max_tokens": "many"}, "max_tokens")]:
        with pytest.raises(SessionError, match=field):
            asyncio.run(complete(body, session, ChatEngine(FakeEngine(0))))
    assert len(session.store) == 0


def test_text_parts_and_null_content_are_taken_in_as_vllm_reads_them(smol):
    """OpenAI content parts are joined by newlines (as vLLM joins them for the template), a
    null content is empty, and a tool result given as parts is one observation."""
    session = created(SessionManager(smol, 4096, {}))
    messages = [{"role": "system", "content": [{"type": "text", "text": "Be brief."}]},
                {"role": "user", "content": [{"type": "text", "text": "Read"}, {"type": "text", "text": "a.txt"}]},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "t1", "type": "function", "function": {"name": "cat", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "t1", "content": [{"type": "text", "text": "line 1"},
                                                                   {"type": "text", "text": "line 2"}]}]
    asyncio.run(complete({"messages": messages}, session, ChatEngine(FakeEngine(0))))
    [record] = session.store.records()
    assert record.content == "line 1\nline 2" and record.signature == "cat({})"
    assert session.context.prefix[1]["content"] == "Read\na.txt"


def test_the_engine_request_is_built_once_and_copied_for_each_engine_call(smol, monkeypatch):
    """vLLM's request model runs once per request (the check of its fields and new messages);
    each engine call (here three: two refusals, then the answer) gets a copy with its own view,
    the client's other fields as they were."""
    built = []
    original = ChatEngine.request

    def counted(self, fields, first_message=0):
        built.append(len(fields["messages"]))
        return original(self, fields, first_message)

    monkeypatch.setattr(ChatEngine, "request", counted)
    session = created(SessionManager(smol, 4096, {}))
    engine = FakeEngine(refusals=2)
    body = {"messages": conversation(8), "temperature": 0.5, "seed": 7, "max_completion_tokens": 64}
    response = asyncio.run(complete(body, session, ChatEngine(engine)))
    assert response["arc"]["engine_calls"] == 3 and built == [len(body["messages"])]
    sent = engine.requests
    assert len({id(request) for request in sent}) == 3
    assert all(request.temperature == 0.5 and request.seed == 7 and request.max_completion_tokens == 64
               for request in sent)
    assert all(request.vllm_xargs["arc_session"] == session.id for request in sent)
    # A resent conversation: the request model checks only the messages the session has not taken in.
    built.clear()
    asyncio.run(complete(dict(body, messages=conversation(9)), session, ChatEngine(FakeEngine(0))))
    assert built == [2]


def test_the_arc_object_and_the_session_record_give_each_figure_one_name(smol):
    session = created(SessionManager(smol, 4096, {}))
    arc = asyncio.run(complete({"messages": conversation(8)}, session, ChatEngine(FakeEngine(refusals=1))))["arc"]
    [record] = session.records
    shared = set(record) - {"time", "stream"}
    assert shared <= set(arc) and {name: arc[name] for name in shared} == {name: record[name] for name in shared}
    assert record["conversation_tokens"] > 0 and record["prefix_cached_tokens"] == 64 == arc["prefix_cached_tokens"]
    assert "prompt_tokens_before_compaction" not in arc and "cached_prompt_tokens" not in arc


def test_a_validation_error_reads_the_same_on_every_api():
    """One format for a request model's validation errors (``errors.validation_message``): the
    field as the client writes it, its index as the client numbers its items, on chat
    completions (vLLM's request model, only the new messages checked) and on the Anthropic and
    Responses adapters alike."""
    from vllm.entrypoints.anthropic.protocol import AnthropicMessagesRequest
    from vllm.entrypoints.openai.responses.protocol import ResponsesRequest

    from arc_vllm.serving.errors import parsed
    from arc_vllm.serving.step.engine import ChatEngine

    bad = {"role": "user", "content": 7}
    messages = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}, bad]
    errors = []
    for check in (lambda: ChatEngine().request({"model": "m", "messages": messages[2:]}, first_message=2),
                  lambda: parsed(AnthropicMessagesRequest, {"model": "m", "max_tokens": 1, "messages": messages[2:]},
                                 first_item=2),
                  lambda: parsed(ResponsesRequest, {"model": "m", "input": [{"type": "message", "role": "user",
                                                                          "content": 7}]}, first_item=2)):
        with pytest.raises(SessionError) as refused:
            check()
        errors.append(str(refused.value))
    head = [error.split(":")[0] for error in errors]
    assert head[0].startswith("messages[2]") and head[1].startswith("messages[2]") and head[2].startswith("input[2]"), errors
    assert all(error.count(";") <= 2 for error in errors)  # at most three problems named


def test_archiving_runs_off_the_event_loop_and_a_cancel_waits_for_it(smol, monkeypatch):
    """``ChatStep.prepare`` (tokenizing, storing, fsyncing a folder's observations) runs in a
    thread: the event loop serves others meanwhile. A request cancelled meanwhile (its client
    gone) returns only once the thread is done, with what was archived recorded, so the
    session's lock is never released under a thread that still writes the session."""
    import threading
    import time

    from arc_vllm.serving.sessions.session import Session

    taking_in, original = threading.Event(), Session.take_in

    def slow_take_in(self, *args, **kwargs):
        taking_in.set()
        time.sleep(0.5)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Session, "take_in", slow_take_in)

    async def scenario(cancel: bool):
        session = await SessionManager(smol, 4096, {}).create()
        request = asyncio.ensure_future(complete({"messages": conversation(4)}, session, ChatEngine(FakeEngine(0))))
        ticks = 0
        while not taking_in.is_set() or ticks < 5:  # the loop runs while the thread archives
            await asyncio.sleep(0.02)
            ticks += 1
        assert not request.done()  # five ticks of the loop inside the half-second archiving
        if not cancel:
            return session, await request
        request.cancel()
        with pytest.raises(asyncio.CancelledError):
            await request
        return session, None

    session, response = asyncio.run(scenario(cancel=False))
    assert response["choices"][0]["message"]["content"] == "done" and len(session.store) == 4
    taking_in.clear()
    session, _ = asyncio.run(scenario(cancel=True))
    # Cancelled while archiving: the thread finished, and the step was recorded (unanswered).
    assert len(session.store) == 4 and session.unsaved
    assert session.records[-1]["unanswered"] is True
