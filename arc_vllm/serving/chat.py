"""The ARC chat path: a chat completion that names an ARC session.

    check_request(...)          vLLM's request model over the fields and the messages the
                                session has not taken in (what it took in was checked then)
    session.take_in(messages)   archive the new observations, fix F, count the tools
    -> render the bounded view (proactive)  ->  vLLM's own chat handler
    -> context-length error? compact and retry (reactive); another error is raised
    -> ARC command in the output? serve it here, append, generate again (at most r)
    -> the final assistant message, with an ``arc`` object, to the client

Commands come from the model's text (the one grammar, ``core/commands.py``) or from its
tool calls named ``_recall``, ``_recall_meta`` or ``_catalog`` (offered beside the request's
own tools when it has any), turned into ``Command`` objects directly. A tool-call command is
answered by a ``role: tool`` message holding the result (the recalled text itself), so the
model continues in its own format. With ``stream: true`` the same loop runs in
``serving/chat_stream.py``, streaming every delta that cannot be an ARC command.

The chat body is every API's: the Anthropic Messages and Responses adapters
(``serving/apis/``) translate their requests into one and its answer back, so the whole path
runs once, for every API (``api`` names it in the records and metrics).

The answer's room is the client's: ``max_tokens`` (``max_completion_tokens``) reaches vLLM as
sent, which grants min(asked, window - prompt). Once ARC acts, views leave the asked room
(``ArcContext.set_answer_room``: up to ``answer_room_percent`` of the window, at least G_max),
and ``arc.max_tokens`` is the room granted. Only a session that asked for a smaller window
than the server's has its answer clamped to that window.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field, replace

from pydantic import ValidationError

from arc_vllm.core.errors import is_context_length_error
from arc_vllm.core.transcript import fingerprints
from arc_vllm.kv.extra_args import COMPACTION_TURN, ArcExtraArgs
from arc_vllm.serving import compaction, metrics
from arc_vllm.serving.conversation_keys import CHAT
from arc_vllm.serving.processes import REPLICA
from arc_vllm.serving.sessions import SessionError, new_from
from arc_vllm.serving.tools import ARC_TOOLS, serve_commands, strip_arc_calls

MAX_REACTIVE_RETRIES = 3
# Set when this engine is a Ray replica's (``serving.ray_replica``): its name.
REPLICA_NAME = os.environ.get(REPLICA)


class EngineError(RuntimeError):
    """vLLM answered with an error that ARC cannot act on; passed to the client as is."""

    def __init__(self, body: dict, status: int):
        super().__init__(json.dumps(body)[:300])
        self.body = body
        self.status = status


def check_body(body: dict, held: int = 0) -> None:
    """What ARC itself needs of a chat body before its session is held: messages to archive,
    each with a role, and one choice or several, counted. A ``SessionError`` (400) otherwise.
    ``held``: the request carries a compaction handle standing for that many messages, so it
    may send no new one. vLLM's own model checks the rest (``check_request``)."""
    check_messages(body, held)
    n = body.get("n")
    if n is not None and (not isinstance(n, int) or isinstance(n, bool) or n < 1):
        raise SessionError("n: must be a positive integer")


def check_request(body: dict, request_class, first_new: int = 0, serving=None) -> None:
    """vLLM's own request model over a chat body, its errors named by field (a ``SessionError``,
    400, for the first problems): every field, and the messages from ``first_new`` on, those the
    session has not taken in before (the ones before were checked when they were new, so a
    resent history costs nothing here). Then the sampling parameters vLLM would make of it
    (``temperature`` 3 is refused there), so that such a request stores nothing either."""
    messages = body["messages"][first_new:] or body["messages"][-1:] or [{"role": "user", "content": ""}]
    tools = body.get("tools")  # as ARC may serve it: its own tools beside the client's
    fields = dict(body, messages=messages, **({"tools": list(tools) + ARC_TOOLS} if isinstance(tools, list) else {}))
    request = engine_request(request_class, first_message=first_new, **fields)
    if hasattr(request, "to_sampling_params"):
        from vllm.exceptions import VLLMClientError

        try:  # the room vLLM would grant is not known yet: the asked, or any
            request.to_sampling_params(asked_tokens(body) or 2 ** 20,
                                       getattr(serving, "default_sampling_params", None) or {})
        except (ValueError, TypeError, VLLMClientError) as error:
            raise SessionError(str(error)) from None


def check_messages(body: dict, held: int = 0) -> None:
    """What ARC reads of every chat body before anything else: messages to archive, each an
    object with a role (``held``: a compaction handle stands for that many, so none may be new)."""
    if not isinstance(body, dict) or not isinstance(body.get("messages"), list) or not (body["messages"] or held):
        raise SessionError("messages: a non-empty list is required")
    for index, message in enumerate(body["messages"]):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise SessionError(f"messages[{index}]: must be an object with a role")


def engine_request(request_class, first_message: int = 0, **fields):
    """vLLM's request model of ``fields``; its validation errors as a ``SessionError`` naming
    each field (``messages[2].content``), the alternatives of a union told once.
    ``first_message``: the index the first of ``fields["messages"]`` has in the client's."""
    try:
        return request_class(**fields)
    except ValidationError as error:
        problems = {}
        for problem in error.errors():
            path = "".join(f"[{part}]" if isinstance(part, int) else f".{part}"
                           for part in item_path(problem["loc"], first_message)
                           if not (isinstance(part, str) and part[:1].isupper()))  # union members
            problems.setdefault(path.lstrip(".") or "body", problem["msg"])
        raise SessionError("; ".join(f"{path}: {message}" for path, message in list(problems.items())[:3])) from None


def item_path(loc, first_item: int) -> list:
    """A validation error's location (pydantic's ``loc``), its item index as the client numbers
    its items, where only those from ``first_item`` on were validated."""
    loc = list(loc)
    if loc[:1] in (["messages"], ["input"]) and len(loc) > 1 and isinstance(loc[1], int):
        loc[1] += first_item
    return loc


def engine_tools(body: dict, request_class, arc: bool) -> list[dict] | None:
    """The tools vLLM will render for this request (the client's, and ARC's once ARC has
    acted), exactly as vLLM hands them to the chat template, so ARC counts the prompt the
    engine gets."""
    if not body.get("tools"):
        return None
    request = engine_request(request_class, messages=[{"role": "user", "content": ""}],
                             tools=list(body["tools"]) + (ARC_TOOLS if arc else []))
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
    granted: int = 0  # the answer's room at the last engine call
    render_ms: float = 0.0  # ARC's own time before the engine calls: render, compactions
    own_ms: float = 0.0  # all of ARC's own time: archiving, rendering, serving commands


class ChatStep:
    """One ARC request on a session, between taking its messages in and the arc object: the
    engine calls (``call``), the commands served between them (``serve``). The caller holds
    the session's lock from ``begin`` until ``end``."""

    def __init__(self, body: dict, session, serving, raw_request, request_class, kv_warmup=None,
                 api: str = CHAT, held: int = 0, handoff: bool = False, ask=None, received: float | None = None,
                 prints_of=fingerprints):
        self.body = body
        self.prints_of = prints_of  # messages -> their fingerprints (``serving/seen_conversations.py``)
        self.received = received  # when the route had the request's body (its time: ``route_ms``)
        self.held = held          # the session's messages a compaction handle stands for
        self.handoff = handoff    # the messages hold ARC's handoff of this session
        self.ask = ask            # a compaction asked of this request (``serving/compaction.py``)
        self.api = api
        self.session = session
        self.serving = serving
        self.raw_request = raw_request
        self.request_class = request_class
        self.session_id = session.id
        self.kv_warmup = kv_warmup
        self.loop = Loop()
        self.context = None  # the session's context, once ``begin`` has taken the messages in

    def begin(self) -> None:
        """Archive the request's new observations (first: once stored, nothing below can lose
        them). ``SessionError`` for a malformed message or a task prefix that cannot fit."""
        session = self.session
        self.started = time.perf_counter()
        # ARC's tools are offered once ARC has acted (stubs exist); until then the prompt is
        # the client's own, byte for byte.
        messages = self.body["messages"]
        prints = self.prints_of(messages)
        check_request(self.body, self.request_class, new_from(prints, session.fingerprints, self.held, self.handoff),
                      self.serving)
        acted = session.context is not None and session.context.has_acted
        with_arc = engine_tools(self.body, self.request_class, True) if acted else None
        self.arc_tools = acted and session.context.fits(with_arc)
        try:
            tools = with_arc if self.arc_tools else engine_tools(self.body, self.request_class, False)
            # Saved once, when the request ends (``end``): the store has every observation
            # durably already (fsync on append).
            self.before_tokens = session.take_in(messages, tools, self.held, self.handoff, save=False,
                                                 prints=prints)
            self.take_in_ms = (time.perf_counter() - self.started) * 1000
        except ValueError as error:
            raise SessionError(f"messages: {error}" if not str(error).startswith("messages")
                               else str(error)) from None
        self.context = context = session.context
        self.compactions, self.recalls = context.num_compactions, context.recall.num_recalls
        if self.ask is not None:
            self.ask.run(self)
        # ``model`` mode: the client's summary prompt, after ARC's view (never archived).
        self.asking = [self.ask.model_prompt] if self.ask is not None and self.ask.model_prompt else []
        xargs = dict(self.body.get("vllm_xargs") or {})
        # vllm_xargs.arc_debug: return each view sent to the engine (for tests and debugging).
        self.debug = bool(xargs.pop("arc_debug", False))
        xargs.pop(COMPACTION_TURN, None)  # the API server's to read (``compaction_turns.py``)
        self.template = request_template(self.body, xargs, session, tools, self.arc_tools)
        self.asked = asked_tokens(self.body)
        # The server's window (vLLM's max_model_len): a session may ask for a smaller one.
        model_config = getattr(self.serving, "model_config", None)
        self.server_window = getattr(model_config, "max_model_len", None) or context.config.context_window

    @property
    def may_serve(self) -> bool:
        """Whether a command in the next output is still served (at most r per step)."""
        return self.loop.served < self.context.config.recalls_per_step

    async def call(self, stream: bool = False):
        """View -> (KV reuse: warm-up) -> engine, compacting and retrying on a context-length
        error (reactive). The response, or with ``stream`` vLLM's event generator; another
        engine error raises ``EngineError``."""
        context, loop, template = self.context, self.loop, self.template
        while True:
            rendering = time.perf_counter()
            view = self.next_view()
            if (self.body.get("n") or 1) > 1 and context.has_acted:
                # Several choices would each need their own commands served and views: once
                # ARC has acted, a session generates one choice per request.
                raise SessionError("n: this session has been compacted; ARC then generates one "
                                   "choice per request (n=1). Before ARC acts, n passes through")
            elapsed = (time.perf_counter() - rendering) * 1000
            loop.render_ms += elapsed
            loop.own_ms += elapsed
            loop.view_tokens.append(view.tokens)
            loop.granted = self.grant(view.tokens, template)
            if self.debug:
                loop.views.append(view.messages)
            metrics.VIEW_TOKENS.observe(view.tokens)
            # The engine-side hook counts this session's compactions per request.
            arc_args = ArcExtraArgs(session=self.session_id,
                                    compactions=context.num_compactions - self.compactions)
            if self.kv_warmup:
                arc_args = replace(arc_args, recompute_tokens=self.kv_warmup.recompute_tokens)
                loop.warmup_tokens += await self.kv_warmup.before(self.session_id, view.messages, context.tools)
            template["vllm_xargs"].update(arc_args.to_dict())
            fields = dict(template, stream=stream)
            if stream:  # ARC counts every call's usage, whatever the client asked for
                continuous = bool((self.body.get("stream_options") or {}).get("continuous_usage_stats"))
                fields["stream_options"] = {"include_usage": True, "continuous_usage_stats": continuous}
            result = await self.serving.create_chat_completion(
                engine_request(self.request_class, **fields, messages=view.messages + self.asking), self.raw_request)
            if hasattr(result, "choices") or hasattr(result, "__aiter__"):
                return result
            if is_context_length_error(result) and loop.retries < MAX_REACTIVE_RETRIES:
                loop.retries += 1
                context.on_overflow(result)
                continue
            dumped = result.model_dump()
            raise EngineError({"error": dumped.get("error", dumped)},
                              getattr(getattr(result, "error", None), "code", 400) or 400)

    def next_view(self):
        """The view the next engine call gets (compacting if it must), leaving the asked room."""
        context = self.context
        # A client's summary prompt the model answers (``model`` mode) follows the view: its room too.
        context.set_answer_room((self.asked or 0) + (context.sizer.messages(self.asking) if self.asking else 0))
        view = context.render()
        if context.has_acted and not self.arc_tools and self.body.get("tools"):
            if self.offer_arc_tools():  # this view compacted: from now on ARC's tools too
                view = context.render()
        return view

    def grant(self, view_tokens: int, template: dict) -> int:
        """The answer's room for a view of ``view_tokens``: vLLM's min(asked, window - prompt),
        in the session's own window where it asked for a smaller one than the server's (then
        the engine request says so)."""
        window = self.context.config.context_window
        room = window - view_tokens
        granted = min(self.asked, room) if self.asked else room
        if window < self.server_window:  # vLLM would grant from its own, larger window
            template["max_tokens"] = granted
            template.pop("max_completion_tokens", None)
        return granted

    def offer_arc_tools(self) -> bool:
        """Offer ARC's tools from now on, where F with them still leaves the other parts their
        minimum. Where it does not (a task prefix near the limit), the model uses the text
        commands the note describes, and the request is served all the same."""
        with_arc = engine_tools(self.body, self.request_class, True)
        if not self.context.fits(with_arc):
            return False
        self.arc_tools = True
        self.context.set_tools(with_arc)
        self.template["tools"] = list(self.body["tools"]) + ARC_TOOLS
        return True

    def count_usage(self, usage) -> None:
        if usage is None:
            return
        if not isinstance(usage, dict):  # a response's usage object; a stream's usage is a dict
            details = getattr(usage, "prompt_tokens_details", None)
            usage = {"prompt_tokens": usage.prompt_tokens,
                     "prompt_tokens_details": {"cached_tokens": getattr(details, "cached_tokens", 0)}}
        self.loop.prompt_tokens += usage.get("prompt_tokens") or 0
        self.loop.cached_tokens += (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0

    def serve(self, message) -> bool:
        """Serve the ARC commands of one output (if still allowed); whether any was."""
        if not self.may_serve:
            return False
        serving = time.perf_counter()
        results = serve_commands(self.context, message)
        self.loop.own_ms += (time.perf_counter() - serving) * 1000
        for outcome in results:
            metrics.RECALLS.labels(result="ok" if outcome.ok else "refused", api=self.api).inc()
        self.loop.served += bool(results)
        return bool(results)

    def end(self, answer: dict | None = None) -> dict:
        """Record the request in the session and save it (the context after this step's
        compactions and commands, for a reopening); the ``arc`` object of the response.
        ``answer``: the assistant message the client got (``answer_of``), kept as the session's
        last answer (a Responses API ``previous_response_id`` continues after it)."""
        context, loop = self.context, self.loop
        if answer is not None:
            self.session.last_answer = answer
        compactions = context.num_compactions - self.compactions
        metrics.REQUESTS.labels(api=self.api).inc()
        metrics.COMPACTIONS.labels(api=self.api).inc(compactions)
        metrics.PROMPT_TOKENS.labels(api=self.api).inc(loop.prompt_tokens)
        metrics.PREFIX_CACHED_TOKENS.labels(api=self.api).inc(loop.cached_tokens)
        total_ms = (time.perf_counter() - self.started) * 1000
        own_ms = loop.own_ms + self.take_in_ms + (self.ask.ms if self.ask is not None else 0.0)
        arc = {
            "session": self.session.id, "api": self.api,
            "view_tokens": loop.view_tokens[-1] if loop.view_tokens else 0,
            "view_tokens_per_call": loop.view_tokens,
            "budget_tokens": context.limit_tokens,
            "max_tokens": loop.granted, "max_tokens_asked": self.asked,
            "prefix_tokens": context.prefix_tokens, "compactions": compactions,
            "recalls": context.recall.num_recalls - self.recalls, "commands_served": loop.served,
            "engine_calls": len(loop.view_tokens), "reactive_retries": loop.retries,
            "prompt_tokens_before_compaction": self.before_tokens,
            "prompt_tokens": loop.prompt_tokens, "cached_prompt_tokens": loop.cached_tokens,
            "kv_warmup_tokens": loop.warmup_tokens,
            "observations": len(context.store), "render_ms": round(loop.render_ms, 2),
            # ARC's own time (archiving, rendering, compacting, serving commands), as in the
            # records; the engine's is the rest of the request's.
            "arc_ms": round(own_ms, 2), "engine_ms": round(max(0.0, total_ms - own_ms), 1)}
        if self.received is not None:  # the route's time before the step: parse, translate, route
            arc["route_ms"] = round((self.started - self.received) * 1000, 2)
        if REPLICA_NAME:  # an engine of a Ray replica: which one served this
            arc["replica"] = REPLICA_NAME
        if self.ask is not None:
            arc["compaction"] = self.ask.record()
            if self.ask.turn is not None:
                arc["client_compaction"] = arc["compaction"]
            if self.ask.compacted:
                metrics.HANDOFFS.labels(api=self.api, kind=self.ask.kind).inc()
        self.session.records.append({
            "time": round(time.time(), 3), "conversation_tokens": self.before_tokens,
            "view_tokens": arc["view_tokens"], "budget_tokens": arc["budget_tokens"],
            "prompt_tokens": loop.prompt_tokens, "prefix_cached_tokens": loop.cached_tokens,
            "compactions": compactions, "recalls": arc["recalls"], "commands_served": loop.served,
            "engine_calls": len(loop.view_tokens), "arc_ms": arc["arc_ms"],
            "engine_ms": arc["engine_ms"], "max_tokens": loop.granted, "api": self.api,
            "stream": bool(self.body.get("stream")),
            **({"handoff": self.ask.kind} if self.ask is not None and self.ask.compacted else {})})
        self.session.save()
        if self.debug:
            arc["views"] = loop.views
        return arc


async def complete(body: dict, session, serving, raw_request, request_class, kv_warmup=None,
                   api: str = CHAT, held: int = 0, handoff: bool = False, ask=None,
                   received: float | None = None, prints_of=fingerprints) -> dict:
    """Run one ARC step for ``session``; returns the response as a JSON-able dict. Raises
    ``SessionError`` for a bad request and ``EngineError`` for an engine error. ``kv_warmup``
    (``serving/kv_warmup.py``, with ``--arc-kv-reuse``) runs before each engine call.
    ``held``, ``handoff``, ``ask``: what the request continues from, and the compaction it asks
    (``serving/compaction.py``); a compaction answered alone calls no engine."""
    check_body(body, held)
    async with session.lock:
        step = ChatStep(body, session, serving, raw_request, request_class, kv_warmup, api, held, handoff, ask,
                        received, prints_of)
        try:
            step.begin()
        except BaseException:
            if step.context is not None:  # what was archived is saved
                step.end()
            raise
        if ask is not None and ask.alone:
            return compaction.response(step, body.get("model") or "")
        try:
            while True:
                result = await step.call()
                step.count_usage(result.usage)
                if len(result.choices) != 1 or not step.serve(result.choices[0].message):
                    break
        except BaseException:
            step.end()
            raise
        response = result.model_dump(exclude_none=True)
        strip_arc_calls(response)
        if appendix := compaction.appended(ask):  # the model's summary, then ARC's stubs and handle
            message = response["choices"][0].setdefault("message", {})
            message["content"] = (message.get("content") or "") + appendix
            ask.decoded_tokens = (response.get("usage") or {}).get("completion_tokens") or 0
        response["arc"] = step.end(answer_of(response["choices"][0].get("message") or {}))
        return response


def answer_of(message: dict) -> dict:
    """The assistant message a client got, as a chat message of its conversation."""
    answer = {"role": "assistant", "content": message.get("content") or ""}
    if message.get("tool_calls"):
        answer["tool_calls"] = [{"id": call.get("id"), "type": "function", "function": {
            "name": call["function"]["name"], "arguments": call["function"].get("arguments") or ""}}
            for call in message["tool_calls"]]
    if message.get("reasoning"):
        answer["reasoning"] = message["reasoning"]
    return answer


def preview_tokens(body: dict, session, request_class) -> tuple[int, int]:
    """The tokens of the view a request would get as the first of ``session`` (a throwaway
    one: nothing is kept), as ``ChatStep`` renders it, ARC's tools included where offered; and
    the conversation's own size as ARC counts it."""
    check_body(body)
    step = ChatStep(body, session, None, None, request_class)
    step.begin()
    return step.next_view().tokens, step.before_tokens


def asked_tokens(body: dict) -> int | None:
    """The answer's length the client asked for: ``max_completion_tokens`` where it is set, else
    ``max_tokens``, as vLLM's chat handler reads them (None: not asked)."""
    asked = body.get("max_completion_tokens")
    return (asked if asked is not None else body.get("max_tokens")) or None


def request_template(body: dict, xargs: dict, session, tools, arc_tools: bool) -> dict:
    """The engine request's fields beside the view: the client's own, ``max_tokens`` included
    (vLLM grants it as it would without ARC), with ARC's session named and ARC's tools."""
    template = {key: value for key, value in body.items()
                if key not in ("messages", "stream", "stream_options")}
    template.update(vllm_xargs={**xargs, **ArcExtraArgs(session=session.id).to_dict()}, stream=False)
    if tools:
        template["tools"] = list(body["tools"]) + (ARC_TOOLS if arc_tools else [])
    return template
