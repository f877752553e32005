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
from dataclasses import dataclass, field

from arc_vllm.core.errors import is_context_length_error
from arc_vllm.serving import metrics
from arc_vllm.serving.sessions import SessionError
from arc_vllm.serving.tools import ARC_TOOLS, serve_commands, strip_arc_calls

MAX_REACTIVE_RETRIES = 3


class EngineError(RuntimeError):
    """vLLM answered with an error that ARC cannot act on; passed to the client as is."""

    def __init__(self, body: dict, status: int):
        super().__init__(json.dumps(body)[:300])
        self.body = body
        self.status = status


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
    for name in ("max_tokens", "max_completion_tokens"):
        value = body.get(name)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
            raise SessionError(f"{name}: must be a positive integer")


def engine_tools(body: dict, request_class) -> list[dict] | None:
    """The tools vLLM will render for this request (the client's and ARC's), exactly as
    vLLM hands them to the chat template, so ARC counts the prompt the engine gets."""
    if not body.get("tools"):
        return None
    request = request_class(messages=[{"role": "user", "content": ""}],
                            tools=list(body["tools"]) + ARC_TOOLS)
    return [tool.model_dump() for tool in request.tools]


@dataclass
class Loop:
    """What one request's engine loop did (the ``arc`` object is written from it)."""

    view_tokens: list[int] = field(default_factory=list)
    views: list[list[dict]] = field(default_factory=list)
    served: int = 0
    retries: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    warmup_tokens: int = 0


async def complete(body: dict, session, serving, raw_request, request_class, kv_warmup=None) -> dict:
    """Run one ARC step for ``session``; returns the response as a JSON-able dict. Raises
    ``SessionError`` for a bad request and ``EngineError`` for an engine error. ``kv_warmup``
    (``serving/kv_warmup.py``, with ``--arc-kv-reuse``) runs before each engine call."""
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
        compactions, recalls = context.num_compactions, context.recall.num_recalls
        started = time.perf_counter()
        xargs = dict(body.get("vllm_xargs") or {})
        # vllm_xargs.arc_debug: return each view sent to the engine (for tests and debugging).
        debug = bool(xargs.pop("arc_debug", False))
        try:
            result, loop = await engine_loop(context, request_template(body, xargs, session, tools),
                                             serving, raw_request, request_class, debug,
                                             kv_warmup and (session.id, kv_warmup))
        finally:  # the context after this step's compactions and commands, for a reopening
            session.save()
        response = result.model_dump(exclude_none=True)
        strip_arc_calls(response)
        compactions = context.num_compactions - compactions
        metrics.COMPACTIONS.inc(compactions)
        metrics.PROMPT_TOKENS.inc(loop.prompt_tokens)
        metrics.PREFIX_CACHED_TOKENS.inc(loop.cached_tokens)
        response["arc"] = {
            "session": session.id, "view_tokens": loop.view_tokens[-1],
            "view_tokens_per_call": loop.view_tokens,
            "budget_tokens": context.config.input_budget_tokens,
            "prefix_tokens": context.prefix_tokens, "compactions": compactions,
            "recalls": context.recall.num_recalls - recalls, "commands_served": loop.served,
            "engine_calls": len(loop.view_tokens), "reactive_retries": loop.retries,
            "prompt_tokens_before_compaction": before_tokens,
            "prompt_tokens": loop.prompt_tokens, "cached_prompt_tokens": loop.cached_tokens,
            "kv_warmup_tokens": loop.warmup_tokens,
            "observations": len(context.store),
            "arc_ms": round((time.perf_counter() - started) * 1000, 1)}
        if debug:
            response["arc"]["views"] = loop.views
        return response


def request_template(body: dict, xargs: dict, session, tools) -> dict:
    """The engine request's fields beside the view: the client's, with ARC's limits."""
    config = session.context.config
    template = {key: value for key, value in body.items()
                if key not in ("messages", "stream", "stream_options", "max_completion_tokens")}
    max_tokens = min(int(body.get("max_tokens") or body.get("max_completion_tokens")
                         or config.max_tokens), config.max_tokens)
    template.update(max_tokens=max_tokens, vllm_xargs={**xargs, "arc_session": session.id},
                    stream=False)
    if tools:
        template["tools"] = list(body["tools"]) + ARC_TOOLS
    return template


async def engine_loop(context, template: dict, serving, raw_request, request_class, debug: bool,
                      kv_warmup: tuple | None = None):
    """View -> (KV reuse: warm-up) -> engine -> (too long? compact, retry) -> (ARC command?
    serve it, again)."""
    loop = Loop()
    compactions_before = context.num_compactions
    while True:
        view = context.render()
        loop.view_tokens.append(view.tokens)
        if debug:
            loop.views.append(view.messages)
        metrics.VIEW_TOKENS.observe(view.tokens)
        # The engine-side hook counts this session's compactions per request.
        template["vllm_xargs"]["arc_compactions"] = context.num_compactions - compactions_before
        if kv_warmup:
            session_id, warmup = kv_warmup
            template["vllm_xargs"]["arc_kv_recompute"] = warmup.recompute_tokens
            loop.warmup_tokens += await warmup.before(session_id, view.messages, context.tools)
        result = await serving.create_chat_completion(
            request_class(**template, messages=view.messages), raw_request)
        if not hasattr(result, "choices"):
            if is_context_length_error(result) and loop.retries < MAX_REACTIVE_RETRIES:
                loop.retries += 1
                context.on_overflow(result)
                continue
            dumped = result.model_dump()
            raise EngineError({"error": dumped.get("error", dumped)},
                              getattr(getattr(result, "error", None), "code", 400) or 400)
        if result.usage is not None:
            loop.prompt_tokens += result.usage.prompt_tokens
            details = getattr(result.usage, "prompt_tokens_details", None)
            loop.cached_tokens += (getattr(details, "cached_tokens", 0) or 0) if details else 0
        # r commands served this step: answer with what the model said.
        if loop.served >= context.config.recalls_per_step:
            return result, loop
        results = serve_commands(context, result.choices[0].message)
        if not results:
            return result, loop
        for outcome in results:
            metrics.RECALLS.labels(result="ok" if outcome.ok else "refused").inc()
        loop.served += 1


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
