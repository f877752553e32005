"""The ARC chat path: a chat completion that names an ARC session.

    ChatStep(...)    check the request (vLLM's request model over its fields and over the
                     messages the session has not taken in: those it took in were checked
                     then), plan its tools, build the engine request, once; nothing stored yet
    .prepare()       archive the new observations (``session.take_in``: fix F, count the
                     tools), run the compaction the request asks
    ... .finish()    record the step, commit the session, before the answer goes out
    -> step.call()   the bounded view (proactive) in a copy of that request -> vLLM's own
                     chat handler (``serving/step/engine.py``)
    -> context-length error? compact and retry (reactive); another error is raised
    -> ARC command in the output? serve it here, append, generate again (at most r)
    -> the final assistant message, with an ``arc`` object (``serving/step/record.py``), to the client

Commands come from the model's text (the one grammar, ``core/commands.py``) or from its
tool calls named ``_recall``, ``_recall_meta`` or ``_catalog`` (offered beside the request's
own tools when it has any), turned into ``Command`` objects directly. A tool-call command is
answered by a ``role: tool`` message holding the result (the recalled text itself), so the
model continues in its own format. With ``stream: true`` the same loop runs in
``serving/step/stream.py``, streaming every delta that cannot be an ARC command.

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

import asyncio
import os
import time
from dataclasses import dataclass, field, replace

from arc_vllm.core.budget import HumanTurnTooLarge
from arc_vllm.core.errors import is_context_length_error
from arc_vllm.core.transcript import fingerprints
from arc_vllm.kv.extra_args import COMPACTION_TURN, ArcExtraArgs
from arc_vllm.serving import metrics
from arc_vllm.serving.compaction.ask import NOTHING_CONTINUED, Continuation, appended, completion_alone
from arc_vllm.serving.step.engine import tools_of
from arc_vllm.serving.metrics import CHAT
from arc_vllm.serving.processes import REPLICA
from arc_vllm.serving.sessions.session import new_from
from arc_vllm.serving.sessions.storage import spent_figures
from arc_vllm.serving.errors import EngineError, SessionError
from arc_vllm.serving.step.record import StepRecord
from arc_vllm.serving.step.tools import ARC_TOOLS, serve_commands, strip_arc_calls

MAX_REACTIVE_RETRIES = 3
# Set when this engine is a Ray replica's (``serving.ray.replica``): its name.
REPLICA_NAME = os.environ.get(REPLICA)


def check_body(body: dict, held: int = 0) -> None:
    """What ARC itself needs of a chat body before its session is held: messages to archive,
    each with a role, and one choice or several, counted. A ``SessionError`` (400) otherwise.
    ``held``: the request carries a compaction handle standing for that many messages, so it
    may send no new one. vLLM's own model checks the rest (``ChatEngine.check``, in the step)."""
    check_messages(body, held)
    n = body.get("n")
    if n is not None and (not isinstance(n, int) or isinstance(n, bool) or n < 1):
        raise SessionError("n: must be a positive integer")


def check_messages(body: dict, held: int = 0) -> None:
    """What ARC reads of every chat body before anything else: messages to archive, each an
    object with a role (``held``: a compaction handle stands for that many, so none may be new)."""
    if not isinstance(body, dict) or not isinstance(body.get("messages"), list) or not (body["messages"] or held):
        raise SessionError("messages: a non-empty list is required")
    for index, message in enumerate(body["messages"]):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise SessionError(f"messages[{index}]: must be an object with a role")


@dataclass
class Loop:
    """What one request's engine loop did (its ``StepRecord`` is written from it)."""

    view_tokens: list[int] = field(default_factory=list)
    views: list[list[dict]] = field(default_factory=list)
    served: int = 0
    retries: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    warmup_tokens: int = 0
    granted: int = 0  # the answer's room at the last engine call
    human_turns: dict = field(default_factory=dict)  # the user's messages the last view showed, by form
    freed_tokens: int = 0  # what its compactions freed
    uncached_tokens: int | None = 0  # what they left to prefill anew (None: a last view not known here)
    render_ms: float = 0.0  # ARC's own time before the engine calls: render, compactions
    own_ms: float = 0.0  # all of ARC's own time: archiving, rendering, serving commands


class ChatStep:
    """One ARC request on a session, between taking its messages in and its ``StepRecord``: the
    engine calls (``call``), the commands served between them (``serve``). Its constructor
    checks the request, plans its tools and builds its engine request, storing nothing (a
    ``SessionError`` for a request that cannot be served); ``prepare`` archives its new
    observations and runs the compaction it asks (what was archived before a failure is saved);
    ``finish`` records and commits it. The caller holds the session (``SessionManager.using``)
    from construction until ``end``.

    ``engine``: the server's ``ChatEngine``. ``continued``, ``ask``: what the request continues
    from (a ``Continuation``: the messages a handle stands for, a handoff the client kept) and
    the compaction it asks (``serving/compaction/ask.py``). ``received``: when the
    route had its body. ``prints_of``: messages -> their fingerprints, from what the process has
    seen of the conversation (``serving/sessions/seen_conversations.py``)."""

    def __init__(self, body: dict, session, engine, raw_request=None, *, api: str = CHAT,
                 continued: Continuation = NOTHING_CONTINUED, ask=None, received: float | None = None,
                 prints_of=fingerprints):
        self.started = time.perf_counter()
        self.body, self.session, self.engine, self.raw_request = body, session, engine, raw_request
        self.api, self.continued, self.ask, self.received = api, continued, ask, received
        self.session_id = session.id
        self.loop = Loop()
        self.asked = asked_tokens(body)
        self.context = None  # the session's context once the messages are in (then a failure saves)
        self.take_in_ms = 0.0
        # ``model`` mode: the client's summary prompt, after ARC's view (never archived).
        self.asking = [ask.model_prompt] if ask is not None and ask.model_prompt else []
        self.prints = prints_of(body["messages"])
        first_new = new_from(self.prints, session.fingerprints, continued.held, continued.handoff)
        checked = engine.check(checked_fields(body, first_new), first_new, self.asked)
        self.stream_options = checked.stream_options  # read here, checked by vLLM's model (a 400 for ``true``)
        self.shown_tools = self.plan_tools(checked)
        self.request = self.engine_request(checked)

    def plan_tools(self, checked) -> int:
        """The tools the engine gets (how many of ``with_arc``, the client's then ARC's, as vLLM
        hands them to the template). ARC's are offered once ARC has acted (stubs exist) and
        still fit; until then the prompt is the client's own, byte for byte."""
        self.all_tools = checked.tools  # None: no tools
        self.with_arc = with_arc = tools_of(checked)
        context = self.session.context
        self.arc_tools = bool(with_arc) and context is not None and context.has_acted and context.fits(with_arc)
        return len(with_arc or ()) if self.arc_tools else len(self.body.get("tools") or ())

    def engine_request(self, checked):
        """The engine request, built once: each engine call is a copy with its view and room."""
        xargs = dict(self.body.get("vllm_xargs") or {})
        # vllm_xargs.arc_debug: return each view sent to the engine (for tests and debugging).
        self.debug = bool(xargs.pop("arc_debug", False))
        xargs.pop(COMPACTION_TURN, None)  # the API server's to read (``serving/compaction/turns.py``)
        return checked.model_copy(update={
            "messages": [], "stream": False, "stream_options": None,
            "vllm_xargs": {**xargs, **ArcExtraArgs(session=self.session_id).to_dict()},
            "tools": checked.tools[:self.shown_tools] if checked.tools else None})

    def prepare(self) -> ChatStep:
        """Archive the request's new messages into the session (``Session.take_in``: every new
        observation stored before anything can hide it), then run the compaction it asks. A
        message that cannot be taken in is a ``SessionError``; what was archived before a
        failure is saved (``end``). Returns the step, ready to ``call``."""
        session, held, handoff = self.session, self.continued.held, self.continued.handoff
        shown = self.with_arc[:self.shown_tools] if self.with_arc else None
        try:
            # Saved once, when the request ends (``end``): the store has every observation
            # durably already (fsync on append).
            self.before_tokens = session.take_in(self.body["messages"], shown, held, handoff, save=False,
                                                 prints=self.prints)
        except ValueError as error:
            raise SessionError(f"messages: {error}" if not str(error).startswith("messages")
                               else str(error)) from None
        self.take_in_ms = (time.perf_counter() - self.started) * 1000
        self.context = context = session.context
        self.compactions, self.recalls = context.num_compactions, context.recall.num_recalls
        # The server's window (vLLM's max_model_len): a session may ask for a smaller one.
        self.server_window = self.engine.window or context.config.context_window
        if self.ask is not None:
            try:
                self.ask.run(session, context, self.before_tokens)
            except BaseException:  # what was archived is saved
                self.end()
                raise
        return self

    @property
    def may_serve(self) -> bool:
        """Whether a command in the next output is still served (at most r per step)."""
        return self.loop.served < self.context.config.recalls_per_step

    async def call(self, stream: bool = False):
        """View -> (KV reuse: warm-up) -> engine, compacting and retrying on a context-length
        error (reactive). The response, or with ``stream`` vLLM's event generator; another
        engine error raises ``EngineError``."""
        context, loop, kv_warmup = self.context, self.loop, self.engine.kv_warmup
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
            if view.compacted:
                loop.freed_tokens += view.freed_tokens
                loop.uncached_tokens = (None if loop.uncached_tokens is None or view.uncached_tokens is None
                                        else loop.uncached_tokens + view.uncached_tokens)
            loop.human_turns = {name: view.human_turns[name] for name in ("verbatim", "shortened", "left_out")}
            loop.granted = self.grant(view.tokens)
            if self.debug:
                loop.views.append(view.messages)
            metrics.VIEW_TOKENS.observe(view.tokens)
            # The engine-side hook counts this session's compactions per request.
            arc_args = ArcExtraArgs(session=self.session_id,
                                    compactions=context.num_compactions - self.compactions)
            if kv_warmup:
                arc_args = replace(arc_args, recompute_tokens=kv_warmup.recompute_tokens)
                loop.warmup_tokens += await kv_warmup.before(self.session_id, view.messages, context.tools)
            update = {"messages": view.messages + self.asking, "stream": stream,
                      "vllm_xargs": {**self.request.vllm_xargs, **arc_args.to_dict()}}
            if stream:  # ARC counts every call's usage, whatever the client asked for
                from vllm.entrypoints.generate.base.protocol import StreamOptions

                continuous = bool(self.stream_options and self.stream_options.continuous_usage_stats)
                update["stream_options"] = StreamOptions(include_usage=True, continuous_usage_stats=continuous)
            if context.config.context_window < self.server_window:  # vLLM would grant from its own, larger window
                update.update(max_tokens=loop.granted, max_completion_tokens=None)
            result = await self.engine.create(self.request.model_copy(update=update), self.raw_request)
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
        try:
            view = context.render()
            if context.has_acted and not self.arc_tools and self.all_tools:
                if self.offer_arc_tools():  # this view compacted: from now on ARC's tools too
                    view = context.render()
        except HumanTurnTooLarge as error:  # stored all the same: a shorter message continues
            raise SessionError(f"messages: {error}") from None
        return view

    def grant(self, view_tokens: int) -> int:
        """The answer's room for a view of ``view_tokens``: vLLM's min(asked, window - prompt),
        in the session's own window (the engine request says so where it is smaller than the
        server's)."""
        room = self.context.config.context_window - view_tokens
        return min(self.asked, room) if self.asked else room

    def offer_arc_tools(self) -> bool:
        """Offer ARC's tools from now on, where F with them still leaves the other parts their
        minimum. Where it does not (a task prefix near the limit), the model uses the text
        commands the note describes, and the request is served all the same."""
        if not self.context.fits(self.with_arc):
            return False
        self.arc_tools = True
        self.context.set_tools(self.with_arc)
        self.request = self.request.model_copy(update={"tools": self.all_tools})
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

    async def finish(self, answer: dict) -> dict:
        """The step done: recorded (``end``), committed to the session's storage before the
        answer goes out, and the ``arc`` object with the storage's share (``store_ms``). Every
        answered path (streamed or not, and a compaction answered with no engine call) ends
        here; a failed one calls ``end()`` alone (what was archived is saved, nothing answered)."""
        arc = self.end(answer)
        await self.session.commit()
        arc.update(spent_figures())
        return arc

    def end(self, answer: dict | None = None) -> dict:
        """Record the request in the session and save it (the context after this step's
        compactions and commands, for a reopening); the ``arc`` object of the response.
        ``answer``: the assistant message the client got (``answer_of``), kept as the session's
        last answer (a Responses API ``previous_response_id`` continues after it)."""
        context, loop, ask = self.context, self.loop, self.ask
        if answer is not None:
            self.session.last_answer = answer
        total_ms = (time.perf_counter() - self.started) * 1000
        own_ms = loop.own_ms + self.take_in_ms + (ask.ms if ask is not None else 0.0)
        record = StepRecord(
            session=self.session.id, api=self.api, stream=bool(self.body.get("stream")),
            conversation_tokens=self.before_tokens, view_tokens_per_call=loop.view_tokens,
            budget_tokens=context.limit_tokens, max_tokens=loop.granted, max_tokens_asked=self.asked,
            prefix_tokens=context.prefix_tokens, compactions=context.num_compactions - self.compactions,
            compaction_freed_tokens=loop.freed_tokens, compaction_uncached_tokens=loop.uncached_tokens,
            recalls=context.recall.num_recalls - self.recalls, commands_served=loop.served,
            reactive_retries=loop.retries, prompt_tokens=loop.prompt_tokens,
            prefix_cached_tokens=loop.cached_tokens, kv_warmup_tokens=loop.warmup_tokens,
            observations=len(context.store), render_ms=round(loop.render_ms, 2),
            # ARC's own time (archiving, rendering, compacting, serving commands); the engine's
            # is the rest of the request's.
            arc_ms=round(own_ms, 2), engine_ms=round(max(0.0, total_ms - own_ms), 1),
            route_ms=None if self.received is None else round((self.started - self.received) * 1000, 2),
            replica=REPLICA_NAME, human_turns=loop.human_turns or None,
            compaction=ask.record() if ask is not None else None,
            client_compaction=ask is not None and ask.turn is not None,
            handoff=ask.kind if ask is not None and ask.compacted else None, unanswered=answer is None)
        metrics.REQUESTS.labels(api=self.api).inc()
        metrics.COMPACTIONS.labels(api=self.api).inc(record.compactions)
        metrics.COMPACTION_FREED_TOKENS.labels(api=self.api).inc(loop.freed_tokens)
        metrics.COMPACTION_UNCACHED_TOKENS.labels(api=self.api).inc(loop.uncached_tokens or 0)
        metrics.PROMPT_TOKENS.labels(api=self.api).inc(loop.prompt_tokens)
        metrics.PREFIX_CACHED_TOKENS.labels(api=self.api).inc(loop.cached_tokens)
        if record.handoff is not None:
            metrics.HANDOFFS.labels(api=self.api, kind=record.handoff).inc()
        self.session.records.append(record.record())
        self.session.save()
        arc = record.arc()
        if self.debug:
            arc["views"] = loop.views
        return arc


def checked_fields(body: dict, first_new: int) -> dict:
    """The fields of ``body`` vLLM's request model checks for a step: every field, the messages
    from ``first_new`` on (those the session has not taken in; the ones before were checked when
    they were new, so a resent history costs nothing here), and the tools as ARC may serve them:
    the client's, then ARC's."""
    messages = body["messages"][first_new:] or body["messages"][-1:] or [{"role": "user", "content": ""}]
    tools = body.get("tools")
    return dict(body, messages=messages, **({"tools": list(tools) + ARC_TOOLS} if isinstance(tools, list) and tools
                                            else {}))


async def prepared(step: ChatStep) -> ChatStep:
    """``step.prepare()`` off the event loop: archiving tokenizes every new message and, for a
    folder, fsyncs every new observation; compacting renders and counts the view. The session
    is the request's alone meanwhile (its lock), so the thread is the only one touching it.

    A thread cannot be stopped: a request cancelled meanwhile (its client gone) waits for it,
    so that the session's lock is not released under it, then saves what was archived."""
    work = asyncio.ensure_future(asyncio.to_thread(step.prepare))
    try:
        return await asyncio.shield(work)
    except asyncio.CancelledError:
        try:
            await work
        except Exception:  # the step saved itself (``prepare``)
            raise asyncio.CancelledError from None
        step.end()
        raise


async def complete(body: dict, session, engine, raw_request=None, **options) -> dict:
    """Run one ARC step for ``session`` on ``engine`` (the server's ``ChatEngine``); returns the
    response as a JSON-able dict. Raises ``SessionError`` for a bad request and ``EngineError``
    for an engine error. ``options``: ``ChatStep``'s keywords (the API, what the request continues
    from, the compaction it asks: a compaction answered alone calls no engine)."""
    check_body(body, options.get("continued", NOTHING_CONTINUED).held)
    step = await prepared(ChatStep(body, session, engine, raw_request, **options))
    ask = step.ask
    if ask is not None and ask.alone:
        return await answered_alone(step, body.get("model") or "")
    reasoning = ""  # of the generations whose command was served: the client's answer holds it, as a stream's does
    try:
        while True:
            result = await step.call()
            step.count_usage(result.usage)
            if len(result.choices) != 1 or not step.serve(result.choices[0].message):
                break
            reasoning += result.choices[0].message.reasoning or ""
    except BaseException:
        step.end()
        raise
    response = result.model_dump(exclude_none=True)
    strip_arc_calls(response)
    if reasoning:
        message = response["choices"][0].setdefault("message", {})
        message["reasoning"] = reasoning + (message.get("reasoning") or "")
    if appendix := appended(ask):  # the model's summary, then ARC's stubs and handle
        message = response["choices"][0].setdefault("message", {})
        message["content"] = (message.get("content") or "") + appendix
        ask.decoded_tokens = (response.get("usage") or {}).get("completion_tokens") or 0
    response["arc"] = await step.finish(answer_of(response["choices"][0].get("message") or {}))
    return response


async def answered_alone(step: ChatStep, model: str) -> dict:
    """The chat completion of a compaction answered with no engine call, its ``arc`` on it
    (the step finished: committed, ``store_ms`` included)."""
    text = step.ask.text()
    arc = await step.finish({"role": "assistant", "content": text})
    return completion_alone(text, model, step.context.counter.count(text), arc)


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


def preview_tokens(body: dict, session, engine) -> tuple[int, int]:
    """The tokens of the view a request would get as the first of ``session`` (a throwaway
    one: nothing is kept), as ``ChatStep`` renders it, ARC's tools included where offered; and
    the conversation's own size as ARC counts it. ``engine``: a ``ChatEngine`` (its handler
    is not called)."""
    check_body(body)
    step = ChatStep(body, session, engine).prepare()
    return step.next_view().tokens, step.before_tokens


def asked_tokens(body: dict) -> int | None:
    """The answer's length the client asked for: ``max_completion_tokens`` where it is set, else
    ``max_tokens``, as vLLM's chat handler reads them (None: not asked; 0 stays 0, which the
    engine's check refuses as vLLM does, before anything is stored)."""
    asked = body.get("max_completion_tokens")
    return asked if asked is not None else body.get("max_tokens")
