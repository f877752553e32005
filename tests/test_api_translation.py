"""The API adapters (``serving/apis/``) without a server: vLLM's own converters and event
processors, the ARC path, and an engine that answers like vLLM's chat handler.

- Over random Anthropic and Responses conversations (hypothesis: bodies of any size and
  alphabet, thinking and reasoning, text and block contents, system messages inside the
  conversation, cache_control marks), each request resending the whole conversation and
  growing it past the window: every view the engine gets is within L in the embedded
  model's real tokens, every observation comes back exactly, and the store's occurrence log
  is the conversation's observations in order (the history rebuilds);
- a command the model streams is served inside the server and never reaches an Anthropic or
  a Responses client: their events are the API's own, in order, with ARC's figures riding
  the last one.
"""

import asyncio
import hashlib
import json
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vllm.entrypoints.anthropic.serving import AnthropicServingMessages
from vllm.entrypoints.openai.responses.serving import OpenAIServingResponses

from arc_vllm.serving.apis.messages import MessagesAPI
from arc_vllm.serving.apis.responses import ResponsesAPI
from arc_vllm.serving.step.chat import complete
from arc_vllm.serving.step.engine import ChatEngine
from arc_vllm.serving.options import ServeOptions
from arc_vllm.serving.step.stream import open_stream
from arc_vllm.serving.compaction.handle import Handles
from arc_vllm.serving.sessions.manager import SessionManager
from tests.helpers.sessions import created
from tests.helpers.histories import make_text

pytestmark = pytest.mark.slow
WINDOW = 4096


class Engine:
    """Answers like vLLM's chat handler: ``text`` (or, streamed, its pieces), one generation
    per entry of ``generations`` in turn, then ``"done"``; records every request."""

    def __init__(self, generations=()):
        self.generations, self.requests = list(generations), []

    async def create_chat_completion(self, request, raw_request):
        self.requests.append(request)
        text = self.generations.pop(0) if self.generations else "done"
        usage = {"prompt_tokens": 100, "completion_tokens": 3, "total_tokens": 103,
                 "prompt_tokens_details": {"cached_tokens": 0}}
        if not request.stream:
            from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionResponse

            return ChatCompletionResponse.model_validate({
                "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "m", "usage": usage,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}]})

        async def events():
            base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0, "model": "m"}
            yield f"data: {json.dumps({**base, 'choices': [{'index': 0, 'delta': {'role': 'assistant', 'content': ''}}]})}\n\n"
            for start in range(0, len(text), 3):
                delta = {"content": text[start:start + 3]}
                yield f"data: {json.dumps({**base, 'choices': [{'index': 0, 'delta': delta}]})}\n\n"
            yield f"data: {json.dumps({**base, 'choices': [{'index': 0, 'delta': {}, 'finish_reason': 'stop'}]})}\n\n"
            yield f"data: {json.dumps({**base, 'choices': [], 'usage': usage})}\n\n"
            yield "data: [DONE]\n\n"
        return events()


def app_with(manager) -> SimpleNamespace:
    """An app's state as the adapters read it: vLLM's own handlers (their converters use no
    engine), and the sessions."""
    anthropic = object.__new__(AnthropicServingMessages)
    anthropic._merge_inline_system = False
    responses = object.__new__(OpenAIServingResponses)
    responses.use_harmony, responses.enable_store, responses.default_sampling_params = False, False, {}
    responses.online_renderer = SimpleNamespace(exclude_tools_when_tool_choice_none=False)
    return SimpleNamespace(state=SimpleNamespace(anthropic_serving_messages=anthropic,
                                                 openai_serving_responses=responses, arc_sessions=manager,
                                                 arc_handles=Handles(b"a test secret, sixteen+"),
                                                 arc_options=ServeOptions(arc=True), arc_engine=ChatEngine()))


async def step(api, body: dict, app, session, engine):
    translation = await api.translate(body, app)
    api.bind(translation, session)
    result = await complete(translation.chat, session, ChatEngine(engine), api=api.name)
    return api.answer(translation, result, app)


bodies = st.tuples(st.integers(0, 2**20), st.one_of(st.integers(0, 400), st.integers(1500, 9000)))
turns = st.lists(st.tuples(bodies, st.booleans(), st.booleans()), min_size=6, max_size=16)


@settings(max_examples=12)
@given(turns)
def test_anthropic_conversations_stay_within_the_window_and_come_back_exactly(smol, plan):
    manager = SessionManager(smol, WINDOW, {})
    session, engine, app = created(manager), Engine(), app_with(manager)
    messages = [{"role": "user", "content": [{"type": "text", "text": "Read everything.",
                                              "cache_control": {"type": "ephemeral"}}]}]
    observations = []
    for index, ((seed, length), as_blocks, reminder) in enumerate(plan):
        body = make_text(seed, length)
        observations.append(body)
        result = [{"type": "text", "text": body}] if as_blocks else body
        messages += [{"role": "assistant", "content": [
                         {"type": "thinking", "thinking": make_text(seed + 1, 40), "signature": f"s{index}"},
                         {"type": "tool_use", "id": f"t{index}", "name": "cat", "input": {"n": index}}]},
                     {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{index}", "content": result}]}]
        if reminder:
            messages.append({"role": "system", "content": "<system-reminder>go on</system-reminder>"})
        answer = asyncio.run(step(MessagesAPI(), {"model": "m", "max_tokens": 16, "system": "Agent.",
                                                  "messages": messages, "tools": [{"name": "cat", "input_schema": {"type": "object"}}]},
                                  app, session, engine))
        assert answer["type"] == "message" and answer["arc"]["session"] == session.id
        messages += [{"role": "assistant", "content": answer["content"]}, {"role": "user", "content": "next"}]
    check(smol, session, engine, observations)


@settings(max_examples=12)
@given(turns)
def test_responses_conversations_stay_within_the_window_and_come_back_exactly(smol, plan):
    manager = SessionManager(smol, WINDOW, {})
    session, engine, app = created(manager), Engine(), app_with(manager)
    items = [{"role": "developer", "content": "Agent."}, {"role": "user", "content": [{"type": "input_text", "text": "Go."}]}]
    observations, previous = [], None
    for index, ((seed, length), continued, reasoning) in enumerate(plan):
        body = make_text(seed, length)
        observations.append(body)
        new = ([{"type": "reasoning", "id": f"rs{index}", "summary": [],
                 "content": [{"type": "reasoning_text", "text": "think"}]}] if reasoning else []) + [
            {"type": "function_call", "call_id": f"c{index}", "name": "cat", "arguments": json.dumps({"n": index})},
            {"type": "function_call_output", "call_id": f"c{index}", "output": body}]
        items += new
        request = {"model": "m", "max_output_tokens": 16, "tools": [{"type": "function", "name": "cat", "parameters": {}}]}
        if continued and previous:  # only what follows the previous response
            request.update(input=new, previous_response_id=previous)
        else:
            request.update(input=items, store=False)
        answer = asyncio.run(step(ResponsesAPI(), request, app, session, engine))
        assert answer["object"] == "response" and answer["arc"]["session"] == session.id
        previous = answer["id"]
        items += [{"role": "assistant", "content": answer["output"][0]["content"][0]["text"]}]
    check(smol, session, engine, observations)
    assert session.num_rebases == 0


def check(smol, session, engine, observations):
    budget = WINDOW - 512
    if sum(map(len, observations)) > 40_000:  # well past the window: ARC acted
        assert session.context.num_compactions > 0
    for request in engine.requests:  # in the model's own tokens, its tools included
        tools = [tool.model_dump() for tool in request.tools] if request.tools else None
        assert smol.count_messages(request.messages, tools) <= budget
    store = session.store  # the tool results, in order (user and system turns are stored too)
    results = [store.get(id) for _, id in store.occurrences if store.get(id).signature.startswith("cat(")]
    assert [record.content for record in results] == observations


@pytest.mark.parametrize("api", [MessagesAPI(), ResponsesAPI()], ids=["messages", "responses"])
def test_a_streamed_command_is_served_inside_and_never_reaches_the_client(smol, api):
    manager = SessionManager(smol, WINDOW, {})
    session, app = created(manager), app_with(manager)
    if api.name == "messages":
        body = {"model": "m", "max_tokens": 16, "stream": True, "messages": [
            {"role": "user", "content": "task"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "cat", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "SECRET=42\n"}]}]}
    else:
        body = {"model": "m", "max_output_tokens": 16, "stream": True, "input": [
            {"role": "user", "content": "task"},
            {"type": "function_call", "call_id": "c", "name": "cat", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c", "output": "SECRET=42\n"}]}

    id = hashlib.sha1(b"cat({})\x1fSECRET=42\n").hexdigest()[:8]  # the id the store gives it
    engine = Engine([f"_recall §{id}\n", "the answer"])

    async def run():
        translation = await api.translate(body, app)
        api.bind(translation, session)
        chunks = await open_stream(translation.chat, session, ChatEngine(engine), api=api.name)

        async def between():  # what the step hands the adapter: chunk objects, not event text
            async for chunk in chunks:
                passed.append(chunk)
                yield chunk
        return [event async for event in api.stream(translation, between(), app)]

    passed = []
    events = asyncio.run(run())
    assert passed and all(isinstance(chunk, dict) for chunk in passed)
    data = [json.loads(event.split("data: ", 1)[1]) for event in events]
    text = "".join(item.get("delta", {}).get("text", "") if api.name == "messages" else item.get("delta", "")
                   for item in data if item["type"] in ("content_block_delta", "response.output_text.delta"))
    assert "_recall" not in "".join(events) and text == "the answer"
    # The recalled text reached the model (its second call), not the client.
    assert len(engine.requests) == 2 and "SECRET=42" in json.dumps(engine.requests[1].messages)
    assert session.store.ids() == [id]
    if api.name == "messages":
        assert [item["type"] for item in data][0] == "message_start" and data[-1]["type"] == "message_stop"
        [delta] = [item for item in data if item["type"] == "message_delta"]
        arc = delta["arc"]
    else:
        assert data[0]["type"] == "response.created" and data[-1]["type"] == "response.completed"
        assert [item["sequence_number"] for item in data] == list(range(len(data)))
        arc = data[-1]["response"]["arc"]
    assert arc["session"] == session.id


@pytest.mark.parametrize("stream", [False, True])
def test_model_mode_the_model_writes_the_summary_from_arcs_view_and_arc_appends_its_stubs(smol, stream):
    """``--arc-client-compaction model``: Claude Code's summary turn reaches the engine as ARC's
    bounded view with the client's prompt after it (the prompt never archived); the answer is
    the model's text, then ARC's stubs, recall line and handle."""
    from arc_vllm.serving.compaction.ask import client_turn

    manager = SessionManager(smol, WINDOW, {})
    session, app = created(manager), app_with(manager)
    engine = Engine(["<analysis>a</analysis><summary>the model's summary</summary>"] * 2)
    messages = [{"role": "user", "content": "Read everything."}]
    for index in range(8):
        messages += [{"role": "assistant", "content": [{"type": "tool_use", "id": f"t{index}", "name": "cat",
                                                        "input": {"n": index}}]},
                     {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{index}",
                                                   "content": make_text(index, 3000)}]}]
    prompt = ("CRITICAL: Respond with TEXT ONLY. Do NOT call any tools.\n\nYour entire response must be plain text: "
              "an <analysis> block followed by a <summary> block.")
    body = {"model": "m", "max_tokens": 64, "stream": stream, "messages": messages + [{"role": "user", "content": prompt}],
            "tools": [{"name": "cat", "input_schema": {"type": "object"}}]}

    async def run():
        api = MessagesAPI()
        translation = await api.translate(body, app)
        translation.ask = client_turn("model", app.state.arc_handles, {}, body, translation, "caller")
        api.bind(translation, session)
        if not stream:
            result = await complete(translation.chat, session, ChatEngine(engine), api=api.name, ask=translation.ask)
            return "".join(block.get("text", "") for block in api.answer(translation, result, app)["content"])
        events = await open_stream(translation.chat, session, ChatEngine(engine), api=api.name,
                                   ask=translation.ask)
        text = ""
        async for event in api.stream(translation, events, app):
            data = json.loads(event.partition("data: ")[2])
            text += (data.get("delta") or {}).get("text") or ""
        return text

    text = asyncio.run(run())
    assert text.startswith("<analysis>a</analysis><summary>the model's summary</summary>\n\n[ARC handoff")
    assert "[ARC handle arc1." in text and "_recall §" in text
    [request] = engine.requests
    sent = request.messages
    assert sent[-1]["content"] == prompt  # the client's prompt, after ARC's bounded view
    assert smol.count_messages(sent[:-1]) <= session.config.input_budget_tokens
    assert all(prompt not in session.store.get(id).content for id in session.store.ids())
    assert len(session.store) == 8 and session.num_handoffs == 1


def translated_both_ways(api_class, body: dict, app, kept):
    """The chat body ``kept`` (an adapter that has translated the conversation's earlier
    requests) makes of ``body``, and the one a fresh adapter makes of it whole."""
    async def run():
        return (await kept.translate(body, app, "", len(json.dumps(body)))).chat, \
            (await api_class().translate(body, app)).chat
    return asyncio.run(run())


steps = st.lists(st.tuples(st.integers(0, 2**20), st.integers(0, 3), st.booleans()), min_size=2, max_size=12)


@settings(max_examples=40)
@given(steps)
def test_a_resent_anthropic_conversation_translates_as_it_would_whole(smol, plan):
    """Each request resends the conversation and adds to it (tool calls and results, text
    turns, thinking, system reminders, an edit of the history now and then): the adapter that
    translated the earlier requests (``apis/translated.py``: only the new messages converted)
    gives the chat body a fresh adapter gives for the whole."""
    app, kept = app_with(SessionManager(smol, WINDOW, {})), MessagesAPI()
    messages = [{"role": "user", "content": "Fix it."}]
    for index, (seed, kind, edit) in enumerate(plan):
        if kind == 0:
            messages += [{"role": "assistant", "content": [
                            {"type": "thinking", "thinking": make_text(seed, 30), "signature": "s"},
                            {"type": "tool_use", "id": f"t{index}", "name": "cat", "input": {"n": index}}]},
                         {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{index}",
                                                       "content": make_text(seed, 200)}]}]
        elif kind == 1:
            messages += [{"role": "assistant", "content": make_text(seed, 40)}, {"role": "user", "content": "next"}]
        elif kind == 2:
            messages.append({"role": "system", "content": "<system-reminder>go on</system-reminder>"})
        else:
            messages.append({"role": "user", "content": [{"type": "text", "text": make_text(seed, 60)}]})
        texts = [at for at, message in enumerate(messages) if at and isinstance(message["content"], str)]
        if edit and texts:  # the client rewrote a text turn of its history
            messages[texts[0]] = dict(messages[texts[0]], content=make_text(seed + 1, 20))
        body = {"model": "m", "max_tokens": 16, "system": "Agent.", "messages": [dict(m) for m in messages],
                "tools": [{"name": "cat", "input_schema": {"type": "object"}}]}
        incremental, whole = translated_both_ways(MessagesAPI, body, app, kept)
        assert incremental == whole


@settings(max_examples=40)
@given(steps)
def test_a_resent_responses_input_translates_as_it_would_whole(smol, plan):
    """The same for Responses input items, with the items vLLM joins to the message before
    them (a function call or reasoning after an assistant's text) at the join."""
    app, kept = app_with(SessionManager(smol, WINDOW, {})), ResponsesAPI()
    items = [{"role": "developer", "content": "Agent."}, {"role": "user", "content": [{"type": "input_text", "text": "Go."}]}]
    for index, (seed, kind, edit) in enumerate(plan):
        if kind == 0:
            items += [{"type": "reasoning", "id": f"rs{index}", "summary": [],
                       "content": [{"type": "reasoning_text", "text": make_text(seed, 20)}]},
                      {"type": "function_call", "call_id": f"c{index}", "name": "cat", "arguments": json.dumps({"n": index})},
                      {"type": "function_call_output", "call_id": f"c{index}", "output": make_text(seed, 200)}]
        elif kind == 1:  # the answer's text: the next step's function call joins it
            items.append({"role": "assistant", "content": make_text(seed, 40)})
        elif kind == 2:
            items.append({"type": "function_call", "call_id": f"d{index}", "name": "cat", "arguments": "{}"})
            items.append({"type": "function_call_output", "call_id": f"d{index}", "output": "ok"})
        else:
            items.append({"role": "user", "content": [{"type": "input_text", "text": make_text(seed, 60)}]})
        if edit and len(items) > 3:
            items[1] = {"role": "user", "content": make_text(seed + 1, 20)}
        body = {"model": "m", "max_output_tokens": 16, "store": False, "instructions": "Be brief.",
                "input": [dict(item) for item in items], "tools": [{"type": "function", "name": "cat", "parameters": {}}]}
        incremental, whole = translated_both_ways(ResponsesAPI, body, app, kept)
        assert incremental == whole


def test_the_chat_adapter_writes_the_events_of_the_chunks_it_is_handed():
    """Only the outermost layer writes event text: for chat completions, each chunk as one
    ``data:`` event, then ``[DONE]``."""
    from arc_vllm.serving.apis.chat import ChatAPI

    async def chunks():
        yield {"id": "c", "choices": [{"index": 0, "delta": {"content": "é"}}]}
        yield {"id": "c", "choices": [], "arc": {"session": "sess_1"}}

    async def run():
        return [event async for event in ChatAPI().stream(None, chunks(), None)]

    events = asyncio.run(run())
    assert events[-1] == "data: [DONE]\n\n" and all(event.endswith("\n\n") for event in events)
    assert [json.loads(event[len("data: "):]) for event in events[:-1]] == [
        {"id": "c", "choices": [{"index": 0, "delta": {"content": "é"}}]},
        {"id": "c", "choices": [], "arc": {"session": "sess_1"}}]


CLIENT_FIXTURES = [("claude_code_continue_request.json", MessagesAPI), ("codex_resume_request.json", ResponsesAPI)]


@pytest.mark.parametrize("fixture,api", CLIENT_FIXTURES, ids=["claude-code", "codex"])
def test_the_clis_continued_requests_hold_the_users_new_words_as_a_human_turn(smol, fixture, api):
    """The request each real CLI sends when its user writes again (recorded by
    ``tests/fixtures/clients/record_continued.py``), through vLLM's own converters: the CLI's
    own context (Claude Code's reminder block and system message, Codex's developer messages and
    environment context) is the task prefix, as sent; the new words are a human turn, stored
    whole; nothing the client injects is taken for the human's."""
    from pathlib import Path

    from arc_vllm.core.transcript import HUMAN_SIGNATURE, human_words

    recorded = json.loads((Path(__file__).parent / "fixtures" / "clients" / fixture).read_text())["body"]
    manager = SessionManager(smol, 32768, {})
    session, app = created(manager), app_with(manager)
    translation = asyncio.run(api().translate(dict(recorded, stream=False), app))
    chat = translation.chat
    session.take_in(chat["messages"], chat.get("tools"), save=False)
    context = session.context
    prefix = json.dumps(context.prefix)
    assert ("<system-reminder>" in prefix) if api is MessagesAPI else ("<environment_context>" in prefix)
    humans = [turn for turn in context.turns if turn.human]
    last = (recorded.get("messages") or recorded.get("input"))[-1]  # what the user wrote, as sent
    second = last["content"] if isinstance(last["content"], str) else last["content"][0]["text"]
    assert second.startswith("IMPORTANT HUMAN INSTRUCTION")
    assert [session.store.get(turn.obs_id).content for turn in humans] == [second]
    assert session.store.get(humans[0].obs_id).signature == HUMAN_SIGNATURE
    for turn in context.turns:  # every other step is the client's, or the assistant's
        if not turn.human and turn.obs_id is not None and turn.role == "user":
            assert not human_words(session.store.get(turn.obs_id).content)
