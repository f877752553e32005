"""The ARC route in front of each of vLLM's conversational routes (chat completions, Anthropic
Messages, Responses): inside vLLM's middleware, so API keys and the rest still apply.

    request -> the session: named (``X-ARC-Session`` or ``vllm_xargs.arc_session``; the body's
               wins), continued by the API's own reference (``previous_response_id``), or, with
               implicit sessions on (``--arc-implicit-sessions``, the default), the session of
               the client's own conversation id (``serving/sessions/conversation_keys.py``) or of its
               conversation's fingerprints (``serving/sessions/conversation_index.py``)
            -> the API's adapter translates it (``serving/apis/``) -> the ARC path
               (``serving/step/chat.py``, ``serving/step/stream.py``) -> the adapter's answer

A request naming no session that ARC does not take (``Declined``: image content, several
choices) is handed to vLLM's own route untouched, its body replayed; so is every request
naming none while implicit sessions are off. An implicit request ARC refuses before storing
anything (a task prefix that cannot fit ARC's parts, say) is served by plain vLLM too.

Errors are raised, and answered once, by the app's exception handlers (``ErrorForms``): in
the error form of the API whose route the request came to.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from dataclasses import dataclass

import anyio
from fastapi import Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import BaseRoute

from arc_vllm.serving import metrics
from arc_vllm.serving.compaction.ask import NOTHING_CONTINUED, Continuation, check_current, client_turn, continuation
from arc_vllm.serving.sessions.manager import Routed
from arc_vllm.serving.sessions import ownership
from arc_vllm.serving.sessions.storage import Spent, spent
from arc_vllm.serving.apis import ConversationAPI, json_body
from arc_vllm.serving.errors import ClientGone, Declined, SessionError
from arc_vllm.serving.step.chat import complete
from arc_vllm.serving.step.stream import open_stream
from arc_vllm.serving.sessions.conversation_keys import SESSION_HEADER, conversation_of, headers_of, session_named

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Routing:
    """What routing decided for one request (``ArcRoute.resolve``), passed on whole."""

    sid: str                          # the session it runs on
    implicit: bool                    # found by its conversation (a refusal may go to plain vLLM)
    who: ownership.Who                # who asks, computed once
    checking: ownership.Who | None    # whom the session must belong to (None: callers unchecked)
    translation: object               # the API's request in the ARC path's form (``apis.Translation``)
    continued: Continuation           # what it continues of a compaction
    routed: Routed | None             # an implicit session's hold on its conversation
    prints_of: object                 # messages -> fingerprints, past what the process has seen


class ArcRoute(BaseRoute):
    """Matches exactly what vLLM's route matches; ARC requests are answered here, the rest are
    passed to that route with their body replayed."""

    def __init__(self, original, api: ConversationAPI):
        self.original = original
        self.api = api

    def matches(self, scope):
        return self.original.matches(scope)

    def url_path_for(self, name, **path_params):
        return self.original.url_path_for(name, **path_params)

    async def handle(self, scope, receive, send):
        chunks, more = [], True
        while more:
            message = await receive()
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        raw = b"".join(chunks)
        received = time.perf_counter()  # the route's own time (parse, translate, route) from here
        replayed = False

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": raw, "more_body": False}
            return await receive()

        async def plain():
            nonlocal replayed
            replayed = False
            return await self.original.handle(scope, replay, send)

        if scope.get("method") != "POST":
            return await plain()
        body = json_body(raw)
        headers = headers_of(scope)
        app = scope["app"]
        sid = session_named(headers.get(SESSION_HEADER), body)
        if sid is None and app.state.arc_options.implicit_sessions != "on":
            return await plain()
        if not isinstance(body, dict):
            if sid is None:  # not JSON: vLLM's own answer, as without --arc
                return await plain()
            raise SessionError("body: must be a JSON object")
        try:
            response = await cancelled_on_disconnect(
                self.handle_arc(Request(scope, replay), body, headers, sid, received, len(raw)), receive)
        except ClientGone:
            return  # nobody to answer; the engine's request was aborted (vLLM's with_cancellation)
        if response is None:  # a request naming no session that ARC does not take
            return await plain()
        await response(scope, replay, send)

    async def resolve(self, app, body: dict, headers: dict, sid: str | None, size: int) -> Routing | None:
        """Everything a request's routing decides, once: who asks, its translation, what it
        continues of a compaction and the compaction it asks, and its session (named, by a
        handle, by the API's own reference, or found by its conversation: ``routed``, whose
        hold on the conversation ends with the request). None: a request ARC declines."""
        api, implicit = self.api, sid is None
        callers = ownership.callers_of(app)
        who = callers.who(headers, body)  # who asks: a session made here is theirs
        try:
            if implicit and not api.carries_handle(body):
                api.declines(body)
            translation = await api.translate(body, app, who.caller, size)
        except Declined:
            return None
        if refused := await app.state.arc_engine.refused_model(translation.chat.get("model")):
            if implicit:  # vLLM answers it, as without --arc
                return None
            raise refused
        manager, handles = app.state.arc_sessions, app.state.arc_handles
        continued = continuation(handles, translation, who.caller, sid)
        turn = client_turn(app.state.arc_options.client_compaction, handles, headers, body, translation, who.caller)
        if turn is not None:  # a client's own summary turn: ARC's, with the request's context edits
            turn.edits = translation.ask.edits if translation.ask is not None else []
            translation.ask = turn
        if continued.handoff and not await manager.known(continued.session):
            continued = NOTHING_CONTINUED  # a handoff of a session gone: a conversation like any
        if implicit and continued.session is not None:
            sid = continued.session
        elif continued.held:
            sid = continued.session
        if sid is None and translation.session is not None:
            sid = translation.session  # the API's own reference names it
        # Each message is fingerprinted once, where it is new (``sessions/seen_conversations.py``).
        prints_of = functools.partial(manager.seen.prints, caller=who.caller, size=size)
        routed = None
        if sid is None:
            routed = await manager.for_conversation(translation.chat["messages"], who.caller,
                                                    conversation_of(api.name, headers, body), who=who,
                                                    prints=prints_of(translation.chat["messages"]))
            sid = routed.id
        return Routing(sid, routed is not None, who, who if callers.checked else None, translation, continued,
                       routed, prints_of)

    async def handle_arc(self, request: Request, body: dict, headers: dict, sid,
                         received: float | None = None, size: int = 0) -> Response | None:
        app, api = request.app, self.api
        if sid is not None and not isinstance(sid, str):
            raise SessionError("vllm_xargs.arc_session: must be a session id string")
        if api.reads:
            return await self.read(request, body, sid)
        spent.set(Spent())  # what this request spends on the session storage (``arc.store_ms``)
        routing = await self.resolve(app, body, headers, sid, size)
        if routing is None:
            return None
        manager, translation = app.state.arc_sessions, routing.translation
        held = contextlib.AsyncExitStack()  # the session, until the answer has gone out
        held.callback(metrics.refresh, manager)  # (callbacks run last first: this one last)
        try:
            try:
                session = await held.enter_async_context(using(manager, routing.sid, routing.continued,
                                                               routing.checking))
            except BaseException:
                await manager.remember(None, routing.routed)  # the conversation's hold ends all the same
                raise
            # Run before the session is let go: its index entry is written from this copy.
            held.push_async_callback(manager.remember, session, routing.routed)
            check_current(routing.continued, session)
            api.bind(translation, session)
            step = dict(api=api.name, continued=routing.continued, ask=translation.ask, received=received,
                        prints_of=routing.prints_of)
            run = open_stream if translation.chat.get("stream") else complete
            result = await run(translation.chat, session, app.state.arc_engine, request, **step)
        except BaseException as exc:  # a client gone (cancelled) lets the session go too
            await held.aclose()
            if isinstance(exc, Exception) and routing.implicit and await declined(app, routing.sid, exc):
                return None
            raise
        # The session by name, so a client whose session was implicit may pin it from now on.
        named = {"X-ARC-Session": session.id}
        if not translation.chat.get("stream"):
            await held.aclose()
            return JSONResponse(api.answer(translation, result, app), headers=named)

        async def relayed():
            try:
                async for event in api.stream(translation, result, app):
                    yield event
            finally:
                # A client gone: Starlette cancels this response's task scope, and keeps
                # cancelling every await under it. Shielded, the engine's request is aborted and
                # the session committed and let go now (its lock, a Redis lease), not when the
                # lease expires.
                with anyio.CancelScope(shield=True):
                    await result.aclose()
                    await held.aclose()

        return StreamingResponse(relayed(), media_type="text/event-stream", headers=named)

    async def read(self, request: Request, body: dict, sid: str | None) -> Response | None:
        manager = request.app.state.arc_sessions
        try:
            if sid is None:
                return JSONResponse(await self.api.read(body, request.app, None))
            async with manager.using(sid, ownership.asking(request)) as session:
                return JSONResponse(await self.api.read(body, request.app, session))
        except Declined:
            return None


async def cancelled_on_disconnect(work, receive):
    """``work``'s result, unless the client disconnects first: then ``work`` is cancelled (the
    engine aborts its request, as vLLM's ``with_cancellation`` makes its own routes do) and
    ``ClientGone`` is raised. The body has been read, so ``receive`` has only the disconnect
    left to give. A stream is not covered here: its answer starts inside ``work``, and
    Starlette's ``StreamingResponse`` cancels it when the client leaves."""
    task = asyncio.ensure_future(work)

    async def disconnected() -> None:
        # After a whole body, ASGI's receive() blocks until the client leaves. A server whose
        # receive answers anything else at once would make a loop here spin without ever yielding
        # to ``work``, so any other message ends the watch: the work then runs to its end.
        if (await receive())["type"] != "http.disconnect":
            await asyncio.Event().wait()

    watch = asyncio.ensure_future(disconnected())
    try:
        await asyncio.wait([task, watch], return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:  # the server itself is stopping this request
        task.cancel()
        watch.cancel()
        raise
    if task.done():
        watch.cancel()
        return task.result()
    task.cancel()
    # What the request archived is committed as it goes (the session manager's shielded commit);
    # its answer never is. Wait for that, whatever the cancelled work ends with.
    with contextlib.suppress(BaseException):
        await task
    logger.info("a client disconnected before its answer: request cancelled")
    raise ClientGone()


@contextlib.asynccontextmanager
async def using(manager, sid: str, continued, asking):
    """The session, for one request of the caller ``asking`` (another's is a 404, as an unknown
    one); one a compaction handle names but the server no longer holds (ended, or removed by
    retention) is a 404 that says so."""
    if continued.session == sid and not await manager.known(sid):
        raise SessionError(f"compaction handle: session {sid} is no longer held by this server (ended, "
                           "or removed by retention); send the conversation whole", 404)
    async with manager.using(sid, asking, write=True) as session:
        yield session


async def declined(app, sid: str, exc: Exception) -> bool:
    """Whether ARC declines an implicit request (a 400 raised before anything was stored),
    dropping the session it had opened for it if that one holds nothing."""
    if not isinstance(exc, SessionError) or exc.status != 400:
        return False
    manager = app.state.arc_sessions
    session = manager.sessions.get(sid)
    if session is not None and session.num_requests == 0:
        await manager.delete(sid)
    return True
