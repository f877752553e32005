"""HTTP surface of ARC sessions, attached to vLLM's own FastAPI app.

    POST   /v1/arc/sessions                           create (optional {"budgets": {...}})
    GET    /v1/arc/sessions                           every session: counts, last used, in memory or not
    GET    /v1/arc/sessions/{sid}                     counts and budgets
    GET    /v1/arc/sessions/{sid}/requests            one record per ARC request, oldest first
    DELETE /v1/arc/sessions/{sid}                     end it (its store is removed)
    GET    /v1/arc/sessions/{sid}/observations/{oid}  a stored observation, exactly
    GET    /v1/arc/sessions/{sid}/catalog?page=N      one catalog page
    GET    /v1/arc/sessions/{sid}/view|timeline|search  read-only looks (``serving.inspector_routes``)

``ArcChatRoute`` sits in front of vLLM's own POST /v1/chat/completions route (inside vLLM's
middleware, so API keys and the rest still apply): a request that names a session
(``vllm_xargs.arc_session`` or the header ``X-ARC-Session``; the body's wins) takes the ARC
path (``serving.chat``, or ``serving.chat_stream`` with ``stream: true``). With implicit
sessions on (``--arc-implicit-sessions``, the default) a request that names none takes it
too, in the session its conversation continues (``serving/conversation_index.py``), unless it
is one ARC does not take (``n`` > 1, non-text content): that one, and every request with
implicit sessions off, is handed to vLLM's route untouched.
"""

from __future__ import annotations

import contextlib
import json

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import ValidationError
from starlette.routing import BaseRoute

from arc_vllm.core.store import UnknownObservation
from arc_vllm.core.transcript import content_text
from arc_vllm.kv.extra_args import session_of_body
from arc_vllm.serving import metrics
from arc_vllm.serving.chat import EngineError, check_body, complete
from arc_vllm.serving.conversation_index import caller_of
from arc_vllm.serving.chat_stream import open_stream
from arc_vllm.serving.session_lock import SessionBusy
from arc_vllm.serving.sessions import SessionError

router = APIRouter()


def error(message: str, status: int, type: str = "invalid_request_error") -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": type, "code": status}}, status)


def manager_of(request: Request):
    return request.app.state.arc_sessions


@router.post("/v1/arc/sessions")
async def create_session(request: Request):
    raw = await request.body()
    try:
        body = json.loads(raw) if raw.strip() else {}
    except json.JSONDecodeError as exc:
        return error(f"body: not JSON ({exc})", 400)
    if not isinstance(body, dict):
        return error("body: must be a JSON object", 400)
    budgets = body.get("budgets")
    if budgets is not None and not isinstance(budgets, dict):
        return error("budgets: must be an object", 400)
    try:
        session = manager_of(request).create(budgets)
    except SessionError as exc:
        return error(str(exc), exc.status)
    metrics.refresh(manager_of(request))
    return JSONResponse(session.describe(), 201)


@router.get("/v1/arc/sessions")
async def list_sessions(request: Request):
    return {"sessions": manager_of(request).listing()}


@router.get("/v1/arc/sessions/{sid}/requests")
async def get_requests(sid: str, request: Request):
    """What each request of the session cost: the conversation's tokens (what plain vLLM
    would have taken), the view's and the budget, prefix-cached tokens, compactions, recalls,
    commands served, engine calls, ARC's own time and the rest (the engine's)."""
    async with manager_of(request).using(sid) as session:
        return list(session.records)


@router.get("/v1/arc/sessions/{sid}")
async def get_session(sid: str, request: Request):
    async with manager_of(request).using(sid) as session:
        return session.describe()


@router.delete("/v1/arc/sessions/{sid}")
async def delete_session(sid: str, request: Request):
    async with manager_of(request).using(sid):
        manager_of(request).delete(sid)
    metrics.refresh(manager_of(request))
    return {"id": sid, "deleted": True}


@router.get("/v1/arc/sessions/{sid}/observations/{oid}")
async def get_observation(sid: str, oid: str, request: Request):
    try:
        async with manager_of(request).using(sid) as session:
            record = session.store.get(oid)
    except UnknownObservation as exc:
        return error(f"{exc} (session {sid})", 404)
    # The exact stored text; metadata in headers so the body is the observation itself.
    return Response(record.content.encode("utf-8"), media_type="text/plain; charset=utf-8",
                    headers={"X-ARC-Id": record.id, "X-ARC-Signature": record.signature.encode(
                        "ascii", "backslashreplace").decode()[:200],
                             "X-ARC-Step": str(record.step)})


@router.get("/v1/arc/sessions/{sid}/catalog")
async def get_catalog(sid: str, request: Request, page: int = 1):
    async with manager_of(request).using(sid) as session:
        context = session.context
        if context is None:
            return {"page": 1, "pages": 1, "text": "", "ids": []}
        if not 1 <= page <= context.catalog.num_pages:
            return error(f"page: {page} is not in 1..{context.catalog.num_pages}", 400)
        return {"page": page, "pages": context.catalog.num_pages,
                "ids": context.catalog.page_ids(page), "text": context.catalog.render(page)}


class ArcChatRoute(BaseRoute):
    """Matches exactly what vLLM's chat route matches; ARC requests are answered here, the
    rest are passed to that route with their body replayed."""

    def __init__(self, original):
        self.original = original

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
        replayed = False

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": raw, "more_body": False}
            return await receive()

        header = dict(scope.get("headers") or []).get(b"x-arc-session")
        try:
            body = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError):
            body = None
        sid = session_named(header.decode() if header else None, body)
        implicit = False
        if scope.get("method") == "POST" and sid is None and implicit_allowed(scope["app"], body):
            headers = dict(scope.get("headers") or [])
            caller = caller_of(headers.get(b"authorization", b"").decode("latin-1"), body.get("user"))
            sid = scope["app"].state.arc_sessions.for_conversation(body["messages"], caller)
            implicit = True
        if sid is None or scope.get("method") != "POST":
            return await self.original.handle(scope, replay, send)
        request = Request(scope, replay)
        response = await self.handle_arc(request, body, sid, implicit)
        if response is None:  # an implicit request ARC cannot take: plain vLLM answers it
            replayed = False
            return await self.original.handle(scope, replay, send)
        await response(scope, replay, send)


    async def handle_arc(self, request: Request, body, sid, implicit: bool = False) -> Response | None:
        """The ARC answer; None for an implicit request ARC refused before storing anything
        (a task prefix that cannot fit ARC's parts, say): plain vLLM serves that one."""
        from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest

        app = request.app
        if not isinstance(body, dict):
            return error("body: must be a JSON object", 400)
        if not isinstance(sid, str):
            return error("vllm_xargs.arc_session: must be a session id string", 400)
        if body.get("stream"):
            return await self.stream_arc(request, body, sid, implicit)
        try:
            async with app.state.arc_sessions.using(sid) as session:
                try:
                    result = await complete(body, session, app.state.openai_serving_chat, request,
                                            ChatCompletionRequest, getattr(app.state, "arc_kv_warmup", None))
                finally:
                    app.state.arc_sessions.remember(session)
        except Exception as exc:
            if implicit and declined(app, sid, exc):
                return None
            return arc_error(exc)
        finally:
            metrics.refresh(app.state.arc_sessions)
        # The session by name, so a client whose session was implicit may pin it from now on.
        return JSONResponse(result, headers={"X-ARC-Session": result["arc"]["session"]})

    async def stream_arc(self, request: Request, body: dict, sid: str, implicit: bool) -> Response | None:
        """A streamed ARC answer: the session is held until the last event is sent; an error
        before the first event is an HTTP error, as for a non-streamed request."""
        from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest

        app = request.app
        held = contextlib.AsyncExitStack()
        try:
            session = await held.enter_async_context(app.state.arc_sessions.using(sid))
            events = await open_stream(body, session, app.state.openai_serving_chat, request,
                                       ChatCompletionRequest, getattr(app.state, "arc_kv_warmup", None))
        except Exception as exc:
            await held.aclose()
            metrics.refresh(app.state.arc_sessions)
            if implicit and declined(app, sid, exc):
                return None
            return arc_error(exc)

        async def relayed():
            try:
                async for event in events:
                    yield event
            finally:
                await events.aclose()
                app.state.arc_sessions.remember(session)
                await held.aclose()
                metrics.refresh(app.state.arc_sessions)

        return StreamingResponse(relayed(), media_type="text/event-stream",
                                 headers={"X-ARC-Session": session.id})


def session_named(header: str | None, body) -> str | None:
    """The session a chat request names: ``vllm_xargs.arc_session``, else ``X-ARC-Session``."""
    named = session_of_body(body)
    return named if named is not None else header


def implicit_allowed(app, body) -> bool:
    """Whether a request naming no session takes the ARC path: implicit sessions are on and
    ARC takes this request (what it would refuse, plain vLLM serves as before)."""
    if not getattr(app.state, "arc_implicit_sessions", False) or not isinstance(body, dict):
        return False
    try:
        check_body(body)
        if (body.get("n") or 1) > 1:  # several choices: plain vLLM's, as without --arc
            return False
        for index, message in enumerate(body["messages"]):
            content_text(message, f"messages[{index}]")
    except ValueError:
        return False
    return True


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


def arc_error(exc: Exception) -> Response:
    """An ARC request's error as the client should see it (re-raised when it is a bug)."""
    if isinstance(exc, SessionError):
        return error(str(exc), exc.status)
    if isinstance(exc, SessionBusy):
        return error(str(exc), 409, "conflict")
    if isinstance(exc, EngineError):
        return JSONResponse(exc.body, exc.status)
    if isinstance(exc, ValidationError):  # vLLM's request model refused the request's fields
        return error(f"request: {exc}", 400)
    raise exc


def attach(app) -> None:
    """Put ARC's routes on vLLM's app, its chat route in front of vLLM's."""
    from arc_vllm.serving.inspector_routes import router as inspector_router

    app.include_router(router)
    app.include_router(inspector_router)
    # The session routes raise these; each becomes its status here, once.
    app.add_exception_handler(SessionError, lambda request, exc: error(str(exc), exc.status))
    app.add_exception_handler(SessionBusy, lambda request, exc: error(str(exc), 409, "conflict"))
    for index, route in enumerate(app.router.routes):
        if getattr(route, "path", None) == "/v1/chat/completions" and "POST" in getattr(route, "methods", ()):
            app.router.routes.insert(index, ArcChatRoute(route))
            return
    raise RuntimeError("vLLM's app has no POST /v1/chat/completions route to put ARC in front of")
