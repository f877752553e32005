"""The Anthropic Messages API (``POST /v1/messages``, ``?beta=true`` too; Claude Code) on the
ARC path, through vLLM's own converters (``entrypoints/anthropic/serving.py``):

    request   ``AnthropicMessagesRequest`` -> ``to_chat_completion_request`` (vLLM's: the system
              blocks, ``tool_use``/``tool_result`` as tool calls and ``role: tool`` messages,
              ``thinking`` as the assistant's ``reasoning``, ``cache_control`` dropped, Claude
              Code's billing header stripped) -> the chat body ARC runs. So until ARC acts the
              engine gets exactly the prompt plain vLLM builds for this request.
    answer    ``messages_full_converter`` (non-streamed) / ``message_stream_converter``
              (``message_start``, ``content_block_*``, ``message_delta``, ``message_stop``) over
              ARC's chat answer; ARC's own tool calls never reach them. ``arc`` rides the
              message (non-streamed) or the ``message_delta`` event.
    errors    Anthropic's form: ``{"type": "error", "error": {"type", "message"}}``.

``POST /v1/messages/count_tokens`` (``count_tokens``) answers for the view ARC would send for
this conversation (``input_tokens``), with the conversation as sent in
``context_management.original_input_tokens``: a client that decides from the count when to
run its own lossy compaction (Claude Code's auto-compact) sees what the model will get.
"""

from __future__ import annotations

import json

from fastapi.responses import JSONResponse

from arc_vllm.serving.apis import ConversationAPI, Translation, check_results
from arc_vllm.serving.errors import Declined, SessionError, parsed
from arc_vllm.serving.apis.messages_compaction import BLOCK, ask_of, compaction_block, take_compaction
from arc_vllm.serving.apis.translated import Translated
from arc_vllm.serving.step.chat import preview_tokens
from arc_vllm.serving.metrics import MESSAGES
from arc_vllm.serving.sessions.session import Session

ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
               404: "not_found_error", 409: "invalid_request_error", 410: "not_found_error",
               413: "request_too_large", 429: "rate_limit_error", 503: "overloaded_error"}
# Stands for a request's messages while its other fields are converted (``translate_new``).
PLACEHOLDER = {"role": "user", "content": "."}
NOT_ARCS = ("image", "document", "search_result", "container_upload")  # content ARC cannot archive


def handler_of(app):
    handler = getattr(app.state, "anthropic_serving_messages", None)
    if handler is None:
        raise Declined("this model serves no Messages API")
    return handler


async def to_chat(handler, request) -> dict:
    """The chat body of an Anthropic request, as vLLM converts it."""
    effort = "none"
    if request.thinking is not None and request.thinking.type == "disabled":
        effort = await handler._get_disabled_thinking_effort()
    try:
        chat = handler.to_chat_completion_request(request, merge_inline_system=handler._merge_inline_system,
                                                  disabled_thinking_effort=effort)
    except (ValueError, TypeError, KeyError, AttributeError) as error:  # a block vLLM cannot read
        raise SessionError(f"messages: not a request vLLM can convert ({type(error).__name__}: {error})") from None
    body = {key: value for key, value in chat.model_dump(exclude_unset=True, exclude={"messages", "tools"}).items()
            if value is not None}
    body["messages"] = list(chat.messages)
    if chat.tools:
        body["tools"] = [tool.model_dump(exclude_none=True) for tool in chat.tools]
    return body


class MessagesAPI(ConversationAPI):
    name = MESSAGES
    paths = ("/v1/messages",)

    def __init__(self):
        self.translated = Translated()  # the conversations last translated (``translated.py``)

    def declines(self, body: dict) -> None:
        messages = body.get("messages")
        for message in messages if isinstance(messages, list) else []:  # a bad shape: ``translate``'s 400
            content = message.get("content") if isinstance(message, dict) else None
            for block in content if isinstance(content, list) else []:
                inner = block.get("content") if isinstance(block, dict) else None
                for part in [block] + (inner if isinstance(inner, list) else []):
                    if isinstance(part, dict) and part.get("type") in NOT_ARCS:
                        raise Declined(f"{part['type']} content")

    def carries_handle(self, body: dict) -> bool:
        messages = body.get("messages")
        return any(isinstance(block, dict) and block.get("type") == BLOCK and block.get("encrypted_content")
                   for message in (messages if isinstance(messages, list) else []) if isinstance(message, dict)
                   for block in (message.get("content") if isinstance(message.get("content"), list) else []))

    async def translate(self, body: dict, app, caller: str = "", size: int = 0) -> Translation:
        from vllm.entrypoints.anthropic.protocol import AnthropicMessagesRequest

        handler = handler_of(app)
        body, handle, edits = take_compaction(body, app.state.arc_handles)
        items = body.get("messages")
        if handle is not None or handler._merge_inline_system or not isinstance(items, list) or not items:
            # The whole request at once: a compaction block's, or inline system messages merged
            # into the system prompt (which then depends on every message).
            request = parsed(AnthropicMessagesRequest, body)
            chat = await to_chat(handler, request)
        else:
            request, chat = await self.translate_new(handler, body, caller, size)
        if handle is not None:  # the session holds everything before the block, the system prompt too
            chat["messages"] = [message for message in chat["messages"] if message.get("role") != "system"]
        else:
            check_results(chat["messages"], "tool_result", "tool_use_id")
        translation = Translation(chat, request, handle=handle)
        translation.ask = ask_of(edits, app.state.arc_handles, caller, handle)
        return translation

    async def translate_new(self, handler, body: dict, caller: str, size: int):
        """The request and its chat body, its messages translated past those a kept
        conversation shares (``translated.py``: each Anthropic message converts alone). The
        request's fields and system prompt, with a placeholder for its messages; then its new
        messages, alone."""
        from vllm.entrypoints.anthropic.protocol import AnthropicMessagesRequest

        items = body["messages"]
        known, converted = self.translated.prefix(caller, items, lambda messages: True)
        request = parsed(AnthropicMessagesRequest, dict(body, messages=[PLACEHOLDER]))
        chat = await to_chat(handler, request)
        system = chat["messages"][:-1]
        new = parsed(AnthropicMessagesRequest, {"model": request.model, "max_tokens": 1, "messages": items[known:]},
                     first_item=known)
        messages = converted + (await to_chat(handler, new))["messages"]
        self.translated.keep(caller, items, messages, size)
        chat["messages"] = system + messages
        return request, chat

    def answer(self, translation: Translation, response: dict, app) -> dict:
        from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionResponse

        arc = response.pop("arc")
        ask = translation.ask
        if ask is not None and ask.item_only:  # paused after compaction: the block, no model call
            message = handler_of(app).messages_full_converter(ChatCompletionResponse.model_validate(
                dict(response, usage={"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0})))
            answer = dict(message.model_dump(exclude_none=True), content=[compaction_block(ask)],
                          stop_reason="compaction")
        else:
            message = handler_of(app).messages_full_converter(ChatCompletionResponse.model_validate(response))
            answer = message.model_dump(exclude_none=True)
            if ask is not None and ask.as_item:
                answer["content"] = [compaction_block(ask), *answer.get("content", [])]
        if ask is not None:
            answer["context_management"] = {"applied_edits": ask.applied}
        return {**answer, "arc": arc}

    async def stream(self, translation: Translation, chunks, app):
        """vLLM's converter over ARC's chunks (written as the chat events it reads); ``arc``
        moved from the last chunk to ``message_delta``, and an error after the first event sent
        as Anthropic's ``error``. Only the events ARC changes are read back."""
        seen: dict = {}

        async def events():
            async for chunk in chunks:
                if "error" in chunk:  # the engine failed mid-stream: the converter stops here
                    seen["error"] = chunk["error"]
                    return
                if "arc" in chunk:
                    seen["arc"] = chunk.pop("arc")
                yield f"data: {json.dumps(chunk, ensure_ascii=False)}\n\n"
            yield "data: [DONE]\n\n"

        ask = translation.ask
        led = ask is not None and ask.as_item  # a compaction block at index 0, the answer after it
        item_only = ask is not None and ask.item_only  # a compaction alone: the block is the answer
        async for event in handler_of(app).message_stream_converter(events()):
            kind = event_kind(event)
            if kind == "message_start" and led:
                yield event
                for block_event in block_events(compaction_block(ask)):
                    yield block_event
                continue
            block = kind.startswith("content_block_")
            if item_only and block:
                continue
            if not (kind == "message_delta" or (led and block)) or (data := event_data(event)) is None:
                yield event  # as vLLM wrote it
                continue
            if block:
                data["index"] += 1
            else:
                if "arc" in seen:
                    data["arc"] = seen["arc"]
                if ask is not None:
                    data["context_management"] = {"applied_edits": ask.applied}
                    if item_only:
                        data["delta"]["stop_reason"] = "compaction"
                        data["usage"] = dict(data.get("usage") or {}, input_tokens=0, output_tokens=0)
            yield sse(kind, data)
        if "error" in seen:
            error = seen["error"]
            yield sse_error(str(error.get("message", error)), int(error.get("code") or 500))

    def error(self, message: str, status: int, kind: str | None = None) -> JSONResponse:
        return JSONResponse(error_body(message, status), status)


def event_kind(event: str) -> str:
    """An Anthropic server-sent event's type (its ``event:`` line)."""
    return event[:event.find("\n")].removeprefix("event: ").strip()


def event_data(event: str) -> dict | None:
    """An Anthropic server-sent event's data (None: not JSON)."""
    try:
        return json.loads(event.partition("data: ")[2])
    except ValueError:
        return None


def sse(kind: str, data: dict) -> str:
    return f"event: {kind}\ndata: {json.dumps(data, ensure_ascii=False, separators=(',', ':'))}\n\n"


def block_events(block: dict, index: int = 0) -> list[str]:
    """A compaction block's events: written whole by ARC, it comes in one delta."""
    return [sse("content_block_start", {"type": "content_block_start", "index": index,
                                        "content_block": {"type": BLOCK, "content": None,
                                                          "encrypted_content": None}}),
            sse("content_block_delta", {"type": "content_block_delta", "index": index,
                                        "delta": {"type": "compaction_delta", "content": block["content"],
                                                  "encrypted_content": block["encrypted_content"]}}),
            sse("content_block_stop", {"type": "content_block_stop", "index": index})]


def error_body(message: str, status: int) -> dict:
    return {"type": "error", "error": {"type": ERROR_TYPES.get(status, "api_error"), "message": message}}


def sse_error(message: str, status: int) -> str:
    return f"event: error\ndata: {json.dumps(error_body(message, status), ensure_ascii=False)}\n\n"


class CountTokensAPI(MessagesAPI):
    """``POST /v1/messages/count_tokens``: a read, answered for the view ARC would send."""

    paths = ("/v1/messages/count_tokens",)
    reads = True

    async def read(self, body: dict, app, session) -> dict:
        """The tokens of the view ARC would send for this conversation (what the model gets:
        the conversation itself while it fits in L, else the bounded view), and the
        conversation's own count as ``context_management.original_input_tokens``. Nothing is
        stored: the view is rendered in a throwaway session with ``session``'s budgets (or
        the server's), over the same counter."""
        from vllm.entrypoints.anthropic.protocol import AnthropicCountTokensRequest
        from vllm.exceptions import VLLMClientError

        handler = handler_of(app)
        body, _, _ = take_compaction(body, app.state.arc_handles)  # counted as the client holds it
        request = parsed(AnthropicCountTokensRequest, body)
        chat = await to_chat(handler, request)
        manager = app.state.arc_sessions
        try:
            conversation = (await handler.count_tokens(request, None)).input_tokens
        except (ValueError, VLLMClientError):  # vLLM does not count past its window
            conversation = None
        config = session.config if session is not None else manager.config(None)
        tokens = conversation
        if conversation is None or conversation > config.input_budget_tokens:  # ARC acts: a bounded view
            try:
                tokens, counted = preview_tokens(chat, Session("sess_count", config, manager.counter, None),
                                                 app.state.arc_engine)
            except ValueError as error:
                raise SessionError(str(error)) from None
            conversation = counted if conversation is None else conversation
        return {"input_tokens": tokens, "context_management": {"original_input_tokens": conversation}}
