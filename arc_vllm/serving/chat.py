"""The ARC chat path: a chat completion that names an ARC session.

    session.take_in(messages)   archive the new observations, fix F, count the tools
    -> render the bounded view (proactive)  ->  vLLM's own chat handler
    -> context-length error? compact and retry (reactive); another error is raised
    -> ARC command in the output? serve it here, append, generate again (at most r)
    -> the final assistant message, with an ``arc`` object, to the client

Commands come from the model's text (the one grammar, ``core/commands.py``) or from its
tool calls named ``_recall``, ``_recall_meta`` or ``_catalog`` (offered beside the request's
own tools when it has any), turned into ``Command`` objects directly. A tool-call command is
answered by a ``role: tool`` message holding the result (the recalled text itself), so the
model continues in its own format. With ``stream: true`` the final message is sent as
server-sent events once the loop is done: ARC must see a whole output to know whether it
is a command.
"""

from __future__ import annotations

import json
import time

from arc_vllm.core.commands import (CatalogNext, CatalogPage, InvalidCommand, Recall, RecallMeta,
                                    parse_commands)
from arc_vllm.core.errors import is_context_length_error
from arc_vllm.core.turn import CHAT, TOOL
from arc_vllm.serving import metrics
from arc_vllm.serving.sessions import SessionError
from arc_vllm.core.transcript import call_signature, tool_call_of

ARC_TOOLS = [
    {"type": "function", "function": {
        "name": "_recall", "description": "Return a stored observation exactly by its §id "
        "(optionally one chunk of a long one).",
        "parameters": {"type": "object", "properties": {
            "id": {"type": "string"}, "chunk": {"type": "integer", "minimum": 1}},
            "required": ["id"]}}},
    {"type": "function", "function": {
        "name": "_recall_meta", "description": "Return only the citation metadata of a §id.",
        "parameters": {"type": "object", "properties": {"id": {"type": "string"}},
                       "required": ["id"]}}},
    {"type": "function", "function": {
        "name": "_catalog", "description": "Show the next page, or page N, of the citation catalog.",
        "parameters": {"type": "object", "properties": {"page": {"type": "integer", "minimum": 1}}}}},
]
ARC_TOOL_NAMES = {tool["function"]["name"] for tool in ARC_TOOLS}
MAX_REACTIVE_RETRIES = 3


class EngineError(RuntimeError):
    """vLLM answered with an error that ARC cannot act on; passed to the client as is."""

    def __init__(self, body: dict, status: int):
        super().__init__(json.dumps(body)[:300])
        self.body = body
        self.status = status


def command_of_call(name: str, arguments: str):
    """The ARC command of one tool call (an ``InvalidCommand`` for bad arguments)."""
    try:
        values = json.loads(arguments or "{}")
    except json.JSONDecodeError:
        values = None
    if not isinstance(values, dict):
        return InvalidCommand(f"{name}({arguments})", "arguments must be a JSON object")
    if name == "_catalog":
        page = values.get("page")
        if page is None:
            return CatalogNext()
        if isinstance(page, int) and not isinstance(page, bool) and page >= 1:
            return CatalogPage(page)
        return InvalidCommand(f"_catalog({arguments})", "page must be an integer >= 1")
    id = values.get("id")
    if not isinstance(id, str) or not id:
        return InvalidCommand(f"{name}({arguments})", "id must be a §id string")
    id = id.strip().lstrip("§")
    if name == "_recall_meta":
        return RecallMeta(id)
    chunk = values.get("chunk")
    if chunk is not None and (not isinstance(chunk, int) or isinstance(chunk, bool) or chunk < 1):
        return InvalidCommand(f"_recall({arguments})", "chunk must be an integer >= 1")
    return Recall(id, chunk)


def serve_commands(context, message) -> list:
    """Serve the ARC commands of one model output; their results (empty: none in it)."""
    calls = [call for call in (message.tool_calls or []) if call.function.name in ARC_TOOL_NAMES]
    results = []
    if calls:
        group = -(context.step + 1)  # unique: never merged with a client message's calls
        for call in calls:
            tool_call = tool_call_of(call.model_dump(), "tool_calls")
            command = command_of_call(tool_call.name, tool_call.arguments)
            # The thought goes with the first call of the message, as for the client's calls.
            results += context.act(call_signature(tool_call), commands=[command], style=TOOL,
                                   call=tool_call, group=group, inline=True,
                                   thought=(message.content or "") if call is calls[0] else "")
        return results
    text = message.content or ""
    commands = parse_commands(text)
    return context.act(text, commands=commands, style=CHAT) if commands else []


def strip_arc_calls(response: dict) -> None:
    """ARC's own tool calls never reach the client (it does not know those tools): after r
    served commands, any left in the final message are dropped."""
    message = response["choices"][0].get("message") or {}
    calls = message.get("tool_calls") or []
    kept = [call for call in calls if call.get("function", {}).get("name") not in ARC_TOOL_NAMES]
    if len(kept) == len(calls):
        return
    if kept:
        message["tool_calls"] = kept
    else:
        message.pop("tool_calls", None)
        message["content"] = message.get("content") or ""
        if response["choices"][0].get("finish_reason") == "tool_calls":
            response["choices"][0]["finish_reason"] = "stop"


def check_body(body: dict) -> None:
    if not isinstance(body.get("messages"), list) or not body["messages"]:
        raise SessionError("messages: a non-empty list is required")
    for index, message in enumerate(body["messages"]):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise SessionError(f"messages[{index}]: must be an object with a role")
    if body.get("tools") is not None and not isinstance(body["tools"], list):
        raise SessionError("tools: must be a list of tool objects")
    if body.get("n") not in (None, 1):
        raise SessionError("n: ARC sessions generate one choice per request (n=1)")
    xargs = body.get("vllm_xargs")
    if xargs is not None and not isinstance(xargs, dict):
        raise SessionError("vllm_xargs: must be an object")
    for field in ("max_tokens", "max_completion_tokens"):
        value = body.get(field)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
            raise SessionError(f"{field}: must be a positive integer")


def engine_tools(body: dict, request_class) -> list[dict] | None:
    """The tools vLLM will render for this request (the client's and ARC's), exactly as
    vLLM hands them to the chat template, so ARC counts the prompt the engine gets."""
    if not body.get("tools"):
        return None
    request = request_class(messages=[{"role": "user", "content": ""}],
                            tools=list(body["tools"]) + ARC_TOOLS)
    return [tool.model_dump() for tool in request.tools]


async def complete(body: dict, session, serving, raw_request, request_class) -> dict:
    """Run one ARC step for ``session``; returns the response as a JSON-able dict. Raises
    ``SessionError`` for a bad request and ``EngineError`` for an engine error."""
    check_body(body)
    async with session.lock:
        try:
            tools = engine_tools(body, request_class)
            # Archive first: once stored, nothing below can lose it.
            before_tokens = session.take_in(body["messages"], tools)
        except ValueError as error:  # a malformed message, or a task prefix that cannot fit
            raise SessionError(f"messages: {error}" if not str(error).startswith("messages")
                               else str(error)) from None
        context = session.context
        max_tokens = min(int(body.get("max_tokens") or body.get("max_completion_tokens")
                             or context.config.max_tokens), context.config.max_tokens)
        xargs = dict(body.get("vllm_xargs") or {})
        xargs["arc_session"] = session.id
        # vllm_xargs.arc_debug: return each view sent to the engine (for tests and debugging).
        debug = bool(xargs.pop("arc_debug", False))
        template = {key: value for key, value in body.items()
                    if key not in ("messages", "stream", "stream_options", "max_completion_tokens")}
        template.update(max_tokens=max_tokens, vllm_xargs=xargs, stream=False)
        if tools:
            template["tools"] = list(body["tools"]) + ARC_TOOLS
        served, retries, compactions_before = 0, 0, context.num_compactions
        recalls_before = context.recall.num_recalls
        prompt_tokens = cached_tokens = 0
        view_tokens, views = [], []
        started = time.perf_counter()
        while True:
            view = context.render()
            view_tokens.append(view.tokens)
            if debug:
                views.append(view.messages)
            metrics.VIEW_TOKENS.observe(view.tokens)
            # The engine-side hook counts this session's compactions per request.
            template["vllm_xargs"]["arc_compactions"] = context.num_compactions - compactions_before
            request = request_class(**template, messages=view.messages)
            result = await serving.create_chat_completion(request, raw_request)
            if not hasattr(result, "choices"):
                if is_context_length_error(result) and retries < MAX_REACTIVE_RETRIES:
                    retries += 1
                    context.on_overflow(result)
                    continue
                dumped = result.model_dump()
                raise EngineError({"error": dumped.get("error", dumped)},
                                  getattr(getattr(result, "error", None), "code", 400) or 400)
            usage = result.usage
            if usage is not None:
                prompt_tokens += usage.prompt_tokens
                details = getattr(usage, "prompt_tokens_details", None)
                cached_tokens += (getattr(details, "cached_tokens", 0) or 0) if details else 0
            message = result.choices[0].message
            # r commands served this step: answer with what the model said.
            if served >= context.config.recalls_per_step:
                break
            results = serve_commands(context, message)
            if not results:
                break
            for outcome in results:
                metrics.RECALLS.labels(result="ok" if outcome.ok else "refused").inc()
            served += 1
        compactions = context.num_compactions - compactions_before
        response = result.model_dump(exclude_none=True)
        strip_arc_calls(response)
        metrics.COMPACTIONS.inc(compactions)
        metrics.PROMPT_TOKENS.inc(prompt_tokens)
        metrics.PREFIX_CACHED_TOKENS.inc(cached_tokens)
        response["arc"] = {
            "session": session.id, "view_tokens": view_tokens[-1], "view_tokens_per_call": view_tokens,
            "budget_tokens": context.config.input_budget_tokens,
            "prefix_tokens": context.prefix_tokens, "compactions": compactions,
            "recalls": context.recall.num_recalls - recalls_before, "commands_served": served,
            "engine_calls": len(view_tokens), "reactive_retries": retries,
            "prompt_tokens_before_compaction": before_tokens,
            "prompt_tokens": prompt_tokens, "cached_prompt_tokens": cached_tokens,
            "observations": len(context.store), "arc_ms": round((time.perf_counter() - started) * 1000, 1)}
        if debug:
            response["arc"]["views"] = views
        return response


def as_events(response: dict, include_usage: bool):
    """The final response as OpenAI chat.completion.chunk server-sent events."""
    base = {"id": response["id"], "object": "chat.completion.chunk", "created": response["created"],
            "model": response["model"]}
    choice = response["choices"][0]
    message = choice["message"]
    delta = {"role": "assistant", "content": message.get("content") or ""}
    if message.get("tool_calls"):
        delta["tool_calls"] = [dict(call, index=i) for i, call in enumerate(message["tool_calls"])]
    yield {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
    final = {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": choice.get("finish_reason")}],
             "arc": response["arc"]}
    yield final
    if include_usage:
        yield {**base, "choices": [], "usage": response.get("usage")}
