"""The ARC route in front of each of vLLM's conversational routes (chat completions, Anthropic
Messages, Responses): inside vLLM's middleware, so API keys and the rest still apply.

    request -> the session: named (``X-ARC-Session`` or ``vllm_xargs.arc_session``; the body's
               wins), continued by the API's own reference (``previous_response_id``), or, with
               implicit sessions on (``--arc-implicit-sessions``, the default), the session of
               the client's own conversation id (``serving/conversation_keys.py``) or of its
               conversation's fingerprints (``serving/conversation_index.py``)
            -> the API's adapter translates it (``serving/apis/``) -> the ARC path
               (``serving/chat.py``, ``serving/chat_stream.py``) -> the adapter's answer

A request naming no session that ARC does not take (``Declined``: image content, several
choices) is handed to vLLM's own route untouched, its body replayed; so is every request
naming none while implicit sessions are off. An implicit request ARC refuses before storing
anything (a task prefix that cannot fit ARC's parts, say) is served by plain vLLM too.

Errors are raised, and answered once, by the app's exception handlers (``ErrorForms``): in
the error form of the API whose route the request came to.
"""

from __future__ import annotations

import contextlib
import functools
import time

from fastapi import Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import BaseRoute

from arc_vllm.serving import compaction, metrics, ownership
from arc_vllm.serving.apis import ConversationAPI, Declined, json_body
from arc_vllm.serving.chat import EngineError, complete
from arc_vllm.serving.chat_stream import open_stream
from arc_vllm.serving.conversation_keys import SESSION_HEADER, conversation_of, headers_of, session_named
from arc_vllm.serving.session_lock import SessionBusy
from arc_vllm.serving.sessions import SessionError

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
        if sid is None and not getattr(app.state, "arc_implicit_sessions", False):
            return await plain()
        if not isinstance(body, dict):
            if sid is None:  # not JSON: vLLM's own answer, as without --arc
                return await plain()
            raise SessionError("body: must be a JSON object")
        response = await self.handle_arc(Request(scope, replay), body, headers, sid, received, len(raw))
        if response is None:  # a request naming no session that ARC does not take
            return await plain()
        await response(scope, replay, send)

    async def handle_arc(self, request: Request, body: dict, headers: dict, sid,
                         received: float | None = None, size: int = 0) -> Response | None:
        app, api = request.app, self.api
        if sid is not None and not isinstance(sid, str):
            raise SessionError("vllm_xargs.arc_session: must be a session id string")
        if api.reads:
            return await self.read(request, body, sid)
        implicit = sid is None
        callers = ownership.callers_of(app)
        making = callers.who(headers, body)  # who asks: a session made here is theirs
        checking = making if callers.checked else None
        caller = making.caller
        try:
            if implicit and not api.carries_handle(body):
                api.declines(body)
            translation = await api.translate(body, app, headers, size)
        except Declined:
            return None
        manager, handles = app.state.arc_sessions, app.state.arc_handles
        continued = compaction.continuation(handles, translation, caller, sid)
        turn = compaction.client_turn(app.state.arc_client_compaction, handles, headers, body, translation, caller)
        if turn is not None:  # a client's own summary turn: ARC's, with the request's context edits
            turn.edits = translation.ask.edits if translation.ask is not None else []
            translation.ask = turn
        if continued.handoff and not (continued.session in manager.sessions or manager.stored(continued.session)):
            continued = compaction.Continuation()  # a handoff of a session gone: a conversation like any
        if continued.session is not None and (implicit or continued.held):
            sid, implicit = continued.session, False
        if implicit and translation.session is not None:
            sid, implicit = translation.session, False  # the API's own reference names it
        routed = None
        # Each message is fingerprinted once, where it is new (``serving/seen_conversations.py``).
        prints_of = functools.partial(manager.seen.prints, caller=caller, size=size)
        if implicit:
            routed = await manager.for_conversation(translation.chat["messages"], caller,
                                                    conversation_of(api.name, headers, body), who=making,
                                                    prints=prints_of(translation.chat["messages"]))
            sid = routed.id
        engine = app.state.arc_engine
        step = {"api": api.name, "held": continued.held, "handoff": continued.handoff, "ask": translation.ask,
                "received": received, "prints_of": prints_of}
        held = contextlib.AsyncExitStack()  # the session, until the answer has gone out
        try:
            try:
                session = await held.enter_async_context(using(manager, sid, continued, checking))
            except BaseException:
                await manager.remember(None, routed)  # the conversation's hold ends all the same
                raise
            # Run before the session is let go: its index entry is written from this copy.
            held.push_async_callback(manager.remember, session, routed)
            compaction.check_current(continued, session)
            api.bind(translation, session)
            if translation.chat.get("stream"):
                chunks = await open_stream(translation.chat, session, engine, request, **step)
            else:
                result = await complete(translation.chat, session, engine, request, **step)
        except Exception as exc:
            await held.aclose()
            metrics.refresh(manager)
            if implicit and declined(app, sid, exc):
                return None
            raise
        if not translation.chat.get("stream"):
            await held.aclose()
            metrics.refresh(manager)
            answer = api.answer(translation, result, app)
            # The session by name, so a client whose session was implicit may pin it from now on.
            return JSONResponse(answer, headers={"X-ARC-Session": session.id})

        async def relayed():
            try:
                async for event in api.stream(translation, chunks, app):
                    yield event
            finally:
                await chunks.aclose()
                await held.aclose()
                metrics.refresh(manager)

        return StreamingResponse(relayed(), media_type="text/event-stream",
                                 headers={"X-ARC-Session": session.id})

    async def read(self, request: Request, body: dict, sid: str | None) -> Response | None:
        manager = request.app.state.arc_sessions
        try:
            if sid is None:
                return JSONResponse(await self.api.read(body, request.app, None))
            async with manager.using(sid, ownership.asking(request)) as session:
                return JSONResponse(await self.api.read(body, request.app, session))
        except Declined:
            return None


def using(manager, sid: str, continued, asking):
    """The session, for one request of the caller ``asking`` (another's is a 404, as an unknown
    one); one a compaction handle names but the server no longer holds (ended, or removed by
    retention) is a 404 that says so."""
    if continued.session == sid and sid not in manager.sessions and not manager.stored(sid):
        raise SessionError(f"compaction handle: session {sid} is no longer held by this server (ended, "
                           "or removed by retention); send the conversation whole", 404)
    return manager.using(sid, asking, write=True)


class ErrorForms:
    """The app's one mapping of ARC's errors to responses, in the error form of the API whose
    route a request came to (the session routes' and chat completions' is OpenAI's)."""

    def __init__(self, apis: list[ConversationAPI], default: ConversationAPI):
        self.by_path = {path: api for api in apis for path in api.paths}
        self.default = default

    def api_of(self, request) -> ConversationAPI:
        return self.by_path.get(request.url.path, self.default)

    def session_error(self, request, exc: SessionError) -> Response:
        return self.api_of(request).error(str(exc), exc.status)

    def busy(self, request, exc: SessionBusy) -> Response:
        return self.api_of(request).error(str(exc), 409, "conflict")

    def engine_error(self, request, exc: EngineError) -> Response:
        """vLLM refused the engine request: its message and status, in the client's form."""
        error = exc.body.get("error") if isinstance(exc.body.get("error"), dict) else {}
        return self.api_of(request).error(str(error.get("message") or exc.body), exc.status,
                                          str(error.get("type") or "invalid_request_error"))

    def install(self, app) -> None:
        app.add_exception_handler(SessionError, self.session_error)
        app.add_exception_handler(SessionBusy, self.busy)
        app.add_exception_handler(EngineError, self.engine_error)


def declined(app, sid: str, exc: Exception) -> bool:
    """Whether ARC declines an implicit request (a 400 raised before anything was stored),
    dropping the session it had opened for it if that one holds nothing."""
    if not isinstance(exc, SessionError) or exc.status != 400:
        return False
    manager = app.state.arc_sessions
    session = manager.sessions.get(sid)
    if session is not None and session.num_requests == 0:
        manager.delete(sid)
    return True


def put_in_front(app, api: ConversationAPI) -> bool:
    """Put ARC's route for ``api`` in front of each of vLLM's POST routes it adapts; whether
    vLLM serves them (a model without that API serves none)."""
    found = False
    for path in api.paths:
        for index, route in enumerate(app.router.routes):
            if getattr(route, "path", None) == path and "POST" in getattr(route, "methods", ()):
                app.router.routes.insert(index, ArcRoute(route, api))
                found = True
                break
    return found


def stand_alone(app, api: ConversationAPI) -> None:
    """ARC's route for an API vLLM does not serve (``POST /v1/responses/compact``): a request ARC
    does not take (implicit sessions off and none named) gets a 400 that says how to ask."""
    from starlette.routing import Route

    async def not_arc(request: Request) -> Response:
        return api.error(f"{api.paths[0]} is served for ARC sessions: name one (X-ARC-Session or "
                         "vllm_xargs.arc_session), or serve with --arc-implicit-sessions on", 400)

    for path in api.paths:
        app.router.routes.insert(0, ArcRoute(Route(path, not_arc, methods=["POST"]), api))

