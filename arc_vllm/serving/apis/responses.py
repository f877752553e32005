"""The OpenAI Responses API (``POST /v1/responses``; Codex CLI, openai-agents' default model) on
the ARC path, through vLLM's own converters (``entrypoints/openai/responses/``):

    request   ``ResponsesRequest`` -> chat messages as vLLM builds them for this API
              (``construct_input_messages``: ``instructions`` as the system message, ``message``
              items of every role as sent, ``function_call``/``function_call_output`` as tool
              calls and ``role: tool`` messages, ``reasoning`` items as the assistant's
              ``reasoning``, encrypted ones refused as vLLM refuses them) and its function
              tools (``construct_tool_dicts``) -> the chat body ARC runs, with the sampling
              fields the two requests share and ``max_output_tokens`` as ``max_tokens``.
    answer    ``build_response_output_items`` and ``ResponsesResponse.from_request`` (non-streamed);
              vLLM's own event processor for the simple path (``response.created``,
              ``response.in_progress``, ``response.output_item.*``, ``response.content_part.*``,
              ``response.output_text.delta``, ``response.function_call_arguments.*``, ...,
              ``response.completed``) over ARC's chunks. ``arc`` rides the response (non-streamed)
              or the response of ``response.completed``.

Both ways of continuing a conversation continue one ARC session: ``store: false`` with the
whole input each turn (Codex: found by its ``prompt_cache_key``), and ``previous_response_id``
naming a response ARC gave. ARC's response ids name their session and request
(``resp_<session>_<request>_<random>``), so any process serving the session (another API
server, a Ray replica, the same server after a restart) continues it: the session takes the
new items in after its last answer. A ``previous_response_id`` ARC did not give is plain
vLLM's to serve (its store, or its 404); one of an earlier response of the session than its
last is a 404 (ARC keeps no branches). Responses are kept in vLLM's own store as vLLM keeps them (``store: true`` with
``VLLM_ENABLE_RESPONSES_API_STORE=1``), so ``GET /v1/responses/{id}`` answers as it does
without ARC.
"""

from __future__ import annotations

import json
import time

from arc_vllm.serving.apis import ConversationAPI, Translation, check_results
from arc_vllm.serving.errors import Declined, SessionError, parsed
from arc_vllm.serving.apis.responses_compaction import (COMPACTION, ask_of, compacted_response, compaction_item,
                                                        is_item, take_compaction)
from arc_vllm.serving.apis.translated import Translated
from arc_vllm.serving.metrics import RESPONSES
from arc_vllm.serving.sessions.conversation_keys import ARC_RESPONSE, arc_response_id

# Fields a Responses request and a chat completion request share, with one meaning.
SHARED_FIELDS = ("temperature", "top_p", "top_k", "min_p", "repetition_penalty", "presence_penalty",
                 "frequency_penalty", "seed", "stop", "stop_token_ids", "ignore_eos", "logit_bias",
                 "skip_special_tokens", "include_stop_str_in_output", "vllm_xargs", "cache_salt",
                 "priority", "chat_template_kwargs", "parallel_tool_calls", "user",
                 "structured_outputs", "include_reasoning", "kv_transfer_params", "ec_transfer_params")
NOT_ARCS = ("input_image", "input_file", "input_audio", "computer_call", "computer_call_output",
            "image_generation_call", "mcp_call", "mcp_list_tools", "mcp_approval_request",
            "mcp_approval_response", "item_reference")


def handler_of(app):
    handler = getattr(app.state, "openai_serving_responses", None)
    if handler is None or handler.use_harmony:  # no Responses API, or gpt-oss's harmony path
        raise Declined("ARC takes the Responses API of chat-template models")
    return handler


def tool_choice_of(choice):
    """A Responses ``tool_choice`` in chat form."""
    if isinstance(choice, str):
        return choice
    name = getattr(choice, "name", None)
    if getattr(choice, "type", None) == "function" and name:
        return {"type": "function", "function": {"name": name}}
    return None


def response_format_of(text) -> dict | None:
    """``text.format`` in chat form (``response_format``)."""
    form = getattr(text, "format", None)
    kind = getattr(form, "type", None)
    if kind == "json_object":
        return {"type": "json_object"}
    if kind == "json_schema":
        return {"type": "json_schema", "json_schema": {
            "name": form.name, "schema": getattr(form, "schema_", None) or getattr(form, "schema", None),
            "strict": getattr(form, "strict", None)}}
    return None


def chat_of(request, messages: list[dict], handler) -> dict:
    """The chat body of a Responses request: its messages, tools and tool choice as vLLM's
    Responses handler would render them, the sampling fields both APIs share, its output
    limit, text format and reasoning effort."""
    from vllm.entrypoints.openai.responses.utils import construct_tool_dicts

    chat = {"model": request.model, "messages": messages, "stream": bool(request.stream)}
    tools = construct_tool_dicts(request.tools, request.tool_choice,
                                 exclude_tools_when_tool_choice_none=getattr(
                                     handler.online_renderer, "exclude_tools_when_tool_choice_none", False))
    if tools:
        chat["tools"] = tools
        if (choice := tool_choice_of(request.tool_choice)) is not None:
            chat["tool_choice"] = choice
    chat.update({name: getattr(request, name) for name in SHARED_FIELDS
                 if name in request.model_fields_set and getattr(request, name) is not None})
    if request.max_output_tokens is not None:
        chat["max_tokens"] = request.max_output_tokens
    if (form := response_format_of(request.text)) is not None:
        chat["response_format"] = form
    if request.reasoning is not None and getattr(request.reasoning, "effort", None):
        chat["reasoning_effort"] = request.reasoning.effort
    if chat["stream"]:
        chat["stream_options"] = {"include_usage": True}
    return chat


class ResponsesAPI(ConversationAPI):
    name = RESPONSES
    paths = ("/v1/responses",)
    compacts = False  # ``POST /v1/responses/compact`` (``CompactAPI``)

    def __init__(self):
        self.translated = Translated()  # the inputs last translated (``translated.py``)

    def carries_handle(self, body: dict) -> bool:
        items = body.get("input")
        return isinstance(items, list) and any(is_item(item, COMPACTION) for item in items)

    def declines(self, body: dict) -> None:
        items = body.get("input") if isinstance(body.get("input"), list) else []
        for item in items:
            content = item.get("content") if isinstance(item, dict) else None
            for part in [item] + (content if isinstance(content, list) else []):
                if isinstance(part, dict) and part.get("type") in NOT_ARCS:
                    raise Declined(f"{part['type']} input")
        if body.get("background") or body.get("previous_input_messages"):
            raise Declined("background responses and previous_input_messages are vLLM's")

    async def translate(self, body: dict, app, caller: str = "", size: int = 0) -> Translation:
        from vllm.entrypoints.openai.responses.protocol import ResponsesRequest

        handler = handler_of(app)
        original_input = body.get("input")
        body, handle, trigger, entry = take_compaction(body, app.state.arc_handles)
        items = body.get("input")
        # A whole input resent (no compaction item, no previous response): its items are
        # validated and converted past those a kept conversation shares (``translated.py``).
        whole = handle is None and body.get("previous_response_id") is None and isinstance(items, list) and items
        known, converted = self.translated.prefix(caller, items, continues_alone) if whole else (0, [])
        request = parsed(ResponsesRequest, dict(body, input=items[known:]) if known else body, first_item=known)
        if handle is not None and request.previous_response_id is not None:
            raise SessionError("previous_response_id: a request carrying a compaction item continues from it; "
                               "send one or the other")
        if request.background:
            raise SessionError("background: ARC sessions answer in the request (background: false)")
        session, extra = None, {"created": int(time.time())}
        if request.previous_response_id is not None:
            ours = ARC_RESPONSE.match(request.previous_response_id)
            if ours is None:
                raise Declined("a response ARC did not give")
            session, extra["after"] = ours.group(1), int(ours.group(2))
        messages = self.messages_of(request, handle, converted if whole else None, caller, items, size)
        chat = chat_of(request, messages, handler)
        if "after" not in extra and handle is None:  # else checked once ``bind`` has them
            check_results(chat["messages"], "function_call_output", "call_id")
        extra["input"] = original_input
        translation = Translation(chat, request, session, extra, handle=handle)
        translation.ask = ask_of(translation, app, caller, trigger, entry, self.compacts)
        return translation

    def messages_of(self, request, handle, converted: list | None, caller: str, items, size: int) -> list[dict]:
        """The chat messages of a Responses request: none of its own for one continuing a
        previous response (``bind`` adds them), its items for one carrying a compaction item (the
        session holds everything before it), else its instructions then its items; ``converted``:
        a whole input resent, whose first items a kept conversation already converted."""
        from vllm.entrypoints.openai.responses.utils import (construct_chat_messages_with_tool_call,
                                                             construct_input_messages)
        from vllm.exceptions import VLLMValidationError

        try:
            if request.previous_response_id is not None:
                construct_chat_messages_with_tool_call(input_items(request.input))  # refused here if bad
                return []  # ``bind``: the session's last answer, then what follows it
            if handle is not None:
                return [dict(message) for message in construct_chat_messages_with_tool_call(input_items(request.input))]
            if converted is not None:  # as construct_input_messages: the instructions, then the items
                messages = converted + [dict(message) for message in
                                        construct_chat_messages_with_tool_call(input_items(request.input))]
                self.translated.keep(caller, items, messages, size)
                return ([{"role": "system", "content": request.instructions}] if request.instructions else []) + messages
            return [dict(message) for message in construct_input_messages(request_instructions=request.instructions,
                                                                           request_input=request.input)]
        except VLLMValidationError as error:
            raise SessionError(f"input: {error}") from None

    def bind(self, translation: Translation, session) -> None:
        request = translation.request
        after = translation.extra.get("after")
        if after is not None:
            if after != session.num_requests or session.last_answer is None:
                raise SessionError(f"previous_response_id {request.previous_response_id!r}: ARC continues "
                                   f"session {session.id} after its last response only (request "
                                   f"{session.num_requests}); send the whole input to branch", 404)
            # The answer as the items a client would echo, then the new ones, converted
            # together as vLLM converts a whole input (a function call after the answer's text
            # joins its message): the session appends them (``Session.take_in``), and the same
            # conversation sent whole later extends it.
            from vllm.entrypoints.openai.responses.utils import construct_chat_messages_with_tool_call

            items = answer_items(session.last_answer) + input_items(request.input)
            translation.chat["messages"] = [dict(message) for message in construct_chat_messages_with_tool_call(items)]
            check_results(translation.chat["messages"], "function_call_output", "call_id")
        if "request_id" not in request.model_fields_set:  # the id names the session and request
            request.request_id = arc_response_id(session.id, session.num_requests + 1)

    def response(self, translation: Translation, app, *, output, status, usage, granted, model):
        """vLLM's ``ResponsesResponse`` for this request."""
        from vllm.entrypoints.openai.responses.protocol import ResponsesResponse

        handler = handler_of(app)
        request = translation.request
        # The room granted (known once the view is; the first events carry what was asked).
        sampling = request.to_sampling_params(max(1, granted or request.max_output_tokens or 1),
                                              handler.default_sampling_params)
        return ResponsesResponse.from_request(request, sampling, model_name=model,
                                              created_time=translation.extra["created"],
                                              output=output, status=status, usage=usage)

    def answer(self, translation: Translation, response: dict, app) -> dict:
        ask = translation.ask
        if ask is not None and ask.item_only:
            if self.compacts:
                return compacted_response(translation, response)
            arc = response.pop("arc")
            nothing = usage_of({"prompt_tokens": 0, "completion_tokens": 0})  # no model call
            final = self.response(translation, app, output=[compaction_item(ask)], usage=nothing,
                                  status="completed", granted=arc["max_tokens"], model=response["model"])
            self.keep(translation, final, app)
            return {**final.model_dump(mode="json", by_alias=True), "arc": arc}
        arc = response.pop("arc")
        [choice] = response["choices"]
        message = choice["message"]
        output = output_items(message, translation.request.tools)
        if ask is not None and ask.as_item:  # a threshold passed: the item leads the output
            output = [compaction_item(ask), *output]
        final = self.response(translation, app, output=output, usage=usage_of(response.get("usage")),
                              status="incomplete" if choice.get("finish_reason") == "length" else "completed",
                              granted=arc["max_tokens"], model=response["model"])
        self.keep(translation, final, app)
        return {**final.model_dump(mode="json", by_alias=True), "arc": arc}

    def keep(self, translation: Translation, final, app) -> None:
        """Where vLLM keeps responses (``store: true`` with its store on), in vLLM's store, so
        ``GET /v1/responses/{id}`` finds it."""
        handler = handler_of(app)
        if translation.request.store and handler.enable_store:
            handler.response_store[final.id] = final

    async def stream(self, translation: Translation, chunks, app):
        from vllm.entrypoints.openai.responses.streaming_events import SimpleStreamingEventProcessor

        request, ask = translation.request, translation.ask
        led = [compaction_item(ask)] if ask is not None and ask.as_item else []
        processor = SimpleStreamingEventProcessor(tools=request.tools)
        processor.state.output_index = len(led)  # the answer's items follow the compaction item
        numbered = Numbered()
        model, usage, arc, finish = request.model, None, None, None
        started = False
        answered = not (ask is not None and ask.item_only)  # a compaction alone: its item is the output
        async for data in chunks:
            if "error" in data:  # the engine failed after the first event
                error = data["error"]
                yield numbered.event({"type": "error", "code": str(error.get("code") or "engine_error"),
                                      "message": str(error.get("message", error)), "param": None})
                return
            model = data.get("model", model)
            if not started:  # the first event goes out at once, as vLLM's
                started = True
                initial = self.response(translation, app, output=[], status="in_progress", usage=None,
                                        granted=None, model=model).model_dump(mode="json", by_alias=True)
                for event in [{"type": "response.created", "response": initial},
                              {"type": "response.in_progress", "response": initial}, *compaction_events(led)]:
                    yield numbered.event(event)
            arc = data.get("arc", arc)
            if not answered:
                usage = data.get("usage") or usage
                continue
            usage = data.get("usage") or usage
            for choice in data.get("choices") or []:
                finish = choice.get("finish_reason") or finish
                for event in events_of(processor, choice.get("delta") or {}):
                    yield numbered.model(event)
        for event in processor.close_current():
            yield numbered.model(event)
        final = self.response(translation, app, output=[*led, *processor.output_items], usage=usage_of(usage),
                              status="incomplete" if finish == "length" else "completed",
                              granted=(arc or {}).get("max_tokens"), model=model)
        self.keep(translation, final, app)
        completed = {**final.model_dump(mode="json", by_alias=True), **({"arc": arc} if arc else {})}
        yield numbered.event({"type": "response.completed", "response": completed})


def events_of(processor, delta: dict) -> list:
    """The Responses events one chat stream delta makes, by vLLM's own event processor (items
    opened and closed as the delta moves between reasoning, text and tool calls)."""
    from vllm.entrypoints.generate.base.protocol import DeltaFunctionCall, DeltaMessage, DeltaToolCall
    from vllm.entrypoints.openai.responses.streaming_events import split_delta

    calls = []
    for piece in delta.get("tool_calls") or []:
        function = piece.get("function") or {}
        calls.append(DeltaToolCall(id=piece.get("id"), type="function", index=piece.get("index", 0),
                                   function=DeltaFunctionCall(name=function.get("name"),
                                                              arguments=function.get("arguments"))))
    message = DeltaMessage(content=delta.get("content") or None, reasoning=delta.get("reasoning"), tool_calls=calls)
    events = []
    for piece in split_delta(message):
        target, call = processor.resolve_target_state(piece)
        if target.name == "NONE":
            continue
        if processor.needs_transition(target, call):
            events += processor.close_current() + processor.open(target, call)
        events += processor.emit_delta(piece, None, None)
    return events


def compaction_events(items: list[dict]) -> list[dict]:
    """The events of compaction items, each whole at once (ARC writes them with no sampling)."""
    events = []
    for index, item in enumerate(items):
        events.append({"type": "response.output_item.added", "output_index": index, "item": item})
        events.append({"type": "response.output_item.done", "output_index": index, "item": item})
    return events


class CompactAPI(ResponsesAPI):
    """``POST /v1/responses/compact`` (the SDK's ``responses.compact``): the request's
    conversation compacted by ARC into one compaction item, with no model call; its answer is
    ``{object: "response.compaction", output: [the input's user messages..., the item]}``.
    vLLM has no such route: ARC's stands alone (``routes.stand_alone``)."""

    paths = ("/v1/responses/compact",)
    compacts = True

    async def translate(self, body: dict, app, caller: str = "", size: int = 0) -> Translation:
        if not isinstance(body.get("model"), str):
            raise SessionError("model: required")
        body = {key: value for key, value in body.items() if key in COMPACT_FIELDS}
        return await super().translate(dict(body, stream=False, store=False), app, caller, size)


# What a compact request may carry (the SDK's ``responses.compact`` parameters ARC reads).
COMPACT_FIELDS = ("model", "input", "instructions", "previous_response_id", "prompt_cache_key", "user",
                  "safety_identifier", "vllm_xargs")


class Numbered:
    """Server-sent Responses events, numbered in order (``sequence_number``)."""

    def __init__(self):
        self.next = 0

    def event(self, data: dict) -> str:
        data = {**data, "sequence_number": self.next}
        self.next += 1
        return f"event: {data['type']}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"

    def model(self, event) -> str:
        return self.event(event.model_dump(mode="json", by_alias=True))


def continues_alone(messages: list[dict]) -> bool:
    """Whether items after those converted to ``messages`` convert alone: vLLM joins a function
    call, reasoning or text that follows an assistant message to that message."""
    return not messages or messages[-1].get("role") != "assistant"


def input_items(given) -> list:
    """A request's ``input`` as a list of items (a string is one user message)."""
    return [{"role": "user", "content": given}] if isinstance(given, str) else list(given)


def answer_items(answer: dict) -> list[dict]:
    """A chat answer as the Responses items a client echoes back: its reasoning, its text,
    its function calls (the order ``build_response_output_items`` gives them)."""
    items: list[dict] = []
    if answer.get("reasoning"):
        items.append({"type": "reasoning", "id": "rs_arc", "summary": [],
                      "content": [{"type": "reasoning_text", "text": answer["reasoning"]}]})
    if answer.get("content"):
        items.append({"role": "assistant", "content": answer["content"]})
    for call in answer.get("tool_calls") or []:
        items.append({"type": "function_call", "call_id": call["id"], "name": call["function"]["name"],
                      "arguments": call["function"]["arguments"]})
    return items


def output_items(message: dict, tools) -> list:
    """The Responses output items of ARC's final chat message (vLLM's builder)."""
    from vllm.entrypoints.generate.base.protocol import FunctionCall
    from vllm.entrypoints.openai.responses.utils import build_response_output_items

    calls = [FunctionCall(id=call["id"], name=call["function"]["name"], arguments=call["function"]["arguments"])
             for call in message.get("tool_calls") or []]
    return build_response_output_items(message.get("reasoning"), message.get("content"), calls, tools=tools)


def usage_of(usage: dict | None):
    """A chat completion's usage as the Responses API's."""
    from vllm.entrypoints.openai.responses.protocol import (InputTokensDetails, OutputTokensDetails,
                                                            ResponseUsage)

    if not usage:
        return None
    prompt, completion = usage.get("prompt_tokens") or 0, usage.get("completion_tokens") or 0
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
    return ResponseUsage(input_tokens=prompt, output_tokens=completion, total_tokens=prompt + completion,
                         input_tokens_details=InputTokensDetails(cached_tokens=cached, cache_write_tokens=0),
                         output_tokens_details=OutputTokensDetails())
