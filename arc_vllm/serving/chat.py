"""The ARC chat path: a chat completion that names an ARC session.

    archive the request's new tool/user messages  ->  render the bounded view (proactive)
    -> vLLM's own chat handler  ->  context-length error? compact and retry (reactive)
    -> ARC command in the output? serve it here, append, generate again (at most r)
    -> the final assistant message, with an ``arc`` object, to the client

Commands are read from the model's text and from tool calls named ``_recall``,
``_recall_meta`` or ``_catalog`` (offered as tools when the request uses tools). With
``stream: true`` the final message is sent as server-sent events once the loop is done:
ARC must see a whole output to know whether it is a command.
"""

from __future__ import annotations

import json
import time

from arc_vllm.core.commands import parse_commands
from arc_vllm.serving import metrics
from arc_vllm.serving.sessions import SessionError
from arc_vllm.serving.transcript import message_text, take_in

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


def commands_in(message) -> str:
    """The ARC command text in a model output (its text, or ARC tool calls), else ''."""
    calls = getattr(message, "tool_calls", None) or []
    lines = []
    for call in calls:
        if call.function.name not in ARC_TOOL_NAMES:
            continue
        try:
            arguments = json.loads(call.function.arguments or "{}")
        except json.JSONDecodeError:
            arguments = {}
        if call.function.name == "_catalog":
            lines.append(f"_catalog page {arguments['page']}" if arguments.get("page") else "_catalog next")
        else:
            chunk = f" {arguments['chunk']}" if arguments.get("chunk") else ""
            lines.append(f"{call.function.name} §{arguments.get('id', '')}{chunk}")
    if lines:
        return "\n".join(lines)
    text = message.content or ""
    return text if parse_commands(text) else ""


def is_context_length_error(error) -> bool:
    text = json.dumps(error.model_dump() if hasattr(error, "model_dump") else str(error)).lower()
    return "maximum context length" in text or "context length" in text and "token" in text


def check_body(body: dict) -> None:
    if not isinstance(body.get("messages"), list) or not body["messages"]:
        raise SessionError("messages: a non-empty list is required")
    for index, message in enumerate(body["messages"]):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise SessionError(f"messages[{index}]: must be an object with a role")
    if body.get("n", 1) != 1:
        raise SessionError("n: ARC sessions generate one choice per request (n=1)")
    xargs = body.get("vllm_xargs")
    if xargs is not None and not isinstance(xargs, dict):
        raise SessionError("vllm_xargs: must be an object")
    for field in ("max_tokens", "max_completion_tokens"):
        value = body.get(field)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
            raise SessionError(f"{field}: must be a positive integer")


async def complete(body: dict, session, serving, raw_request, request_class) -> dict:
    """Run one ARC step for ``session``; returns the response as a JSON-able dict."""
    check_body(body)
    async with session.lock:
        try:
            items = take_in(body["messages"], session.fingerprints, session.context is not None)
        except ValueError as error:
            raise SessionError(str(error)) from None
        if session.context is None:
            try:
                session.start(items.prefix or [{"role": "user", "content": ""}])
            except ValueError as error:  # the task prefix is over B
                raise SessionError(f"messages: {error}") from None
        context = session.context
        # What the conversation would cost without ARC: kept as a running sum over the
        # messages taken in (each counted once, as a chat message of the model's template).
        for message in items.new_messages:
            session.full_tokens += context.sizer({"role": message.get("role", "user"),
                                                  "content": message_text(message)})
        before_tokens = context.prefix_tokens + session.full_tokens
        # Archive first: once stored, nothing below can lose it.
        for _, action, observation, thought in items.events:
            context.observe(action, observation, thought=thought)
        session.fingerprints = items.fingerprints
        session.num_requests += 1
        session.save()

        limit = context.config.recalls_per_step
        max_tokens = min(int(body.get("max_tokens") or body.get("max_completion_tokens")
                             or context.config.max_tokens), context.config.max_tokens)
        xargs = dict(body.get("vllm_xargs") or {})
        xargs["arc_session"] = session.id
        template = {key: value for key, value in body.items()
                    if key not in ("messages", "stream", "stream_options", "max_completion_tokens")}
        template.update(max_tokens=max_tokens, vllm_xargs=xargs, stream=False)
        if body.get("tools"):
            template["tools"] = list(body["tools"]) + ARC_TOOLS
        served, retries, compactions_before = 0, 0, context.num_compactions
        recalls_before = context.recall.num_recalls
        prompt_tokens = cached_tokens = 0
        view_tokens = []
        # vllm_xargs.arc_debug: return each view sent to the engine (for tests and debugging).
        debug = bool(xargs.pop("arc_debug", False))
        views = []
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
                return {"error": result.model_dump().get("error", result.model_dump()),
                        "_status": getattr(getattr(result, "error", None), "code", 400)}
            usage = result.usage
            if usage is not None:
                prompt_tokens += usage.prompt_tokens
                details = getattr(usage, "prompt_tokens_details", None)
                cached_tokens += (getattr(details, "cached_tokens", 0) or 0) if details else 0
            message = result.choices[0].message
            command = commands_in(message)
            if not command:
                break
            if served >= limit:
                # r commands served this step: answer with what the model said.
                break
            results = context.act(command, thought="")
            for outcome in results or []:
                metrics.RECALLS.labels(result="ok" if outcome.ok else "refused").inc()
            served += 1
        compactions = context.num_compactions - compactions_before
        metrics.COMPACTIONS.inc(compactions)
        metrics.PROMPT_TOKENS.inc(prompt_tokens)
        metrics.PREFIX_CACHED_TOKENS.inc(cached_tokens)
        response = result.model_dump(exclude_none=True)
        response["arc"] = {
            "session": session.id, "view_tokens": view_tokens[-1], "view_tokens_per_call": view_tokens,
            "budget_tokens": context.config.input_budget_tokens, "compactions": compactions,
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
