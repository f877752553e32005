"""HTTP surface of ARC sessions, attached to vLLM's own FastAPI app.

    POST   /v1/arc/sessions                           create (optional {"budgets": {...}})
    GET    /v1/arc/sessions                           every session: counts, last used, in memory or not
    GET    /v1/arc/sessions/{sid}                     counts and budgets
    GET    /v1/arc/sessions/{sid}/requests            one record per ARC request, oldest first
    DELETE /v1/arc/sessions/{sid}                     end it (its store is removed)
    GET    /v1/arc/sessions/{sid}/observations/{oid}  a stored observation, exactly (its signature
                                                      percent-encoded in X-ARC-Signature)
    GET    /v1/arc/sessions/{sid}/catalog?page=N      one catalog page
    GET    /v1/arc/sessions/{sid}/view|timeline|search  read-only looks (``serving.inspector_routes``)
    GET    /v1/models                                 vLLM's answer, each model with ``arc``: its
                                                      window, the budgets, and the compaction ARC
                                                      serves (so clients can configure themselves)

``attach`` puts ARC's route (``serving/api_route.py``) in front of each of vLLM's own
conversational routes: POST /v1/chat/completions, /v1/messages (and its count_tokens) and
/v1/responses, each through its API's adapter (``serving/apis/``).
"""

from __future__ import annotations

import logging
from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from arc_vllm.core.store import UnknownObservation
from arc_vllm.serving import metrics
from arc_vllm.serving.apis import json_body
from arc_vllm.serving.sessions.ownership import asking, maker
from arc_vllm.serving.errors import SessionError

logger = logging.getLogger(__name__)

router = APIRouter()


def header_text(text: str) -> str:
    """User text as a header value: percent-encoded UTF-8, printable ASCII kept as it is."""
    return quote(text.encode("utf-8", "surrogatepass"), safe=HEADER_SAFE)


# Printable ASCII but "%": what a header value may hold as it is.
HEADER_SAFE = "".join(chr(code) for code in range(0x20, 0x7F) if chr(code) != "%")


def manager_of(request: Request):
    return request.app.state.arc_sessions


@router.post("/v1/arc/sessions")
async def create_session(request: Request):
    raw = await request.body()
    body = json_body(raw) if raw.strip() else {}  # errors are SessionErrors: ErrorForms answers them
    if body is None:
        raise SessionError("body: not JSON")
    if not isinstance(body, dict):
        raise SessionError("body: must be a JSON object")
    budgets = body.get("budgets")
    if budgets is not None and not isinstance(budgets, dict):
        raise SessionError("budgets: must be an object")
    session = await manager_of(request).create(budgets, who=maker(request, body))
    metrics.refresh(manager_of(request))
    return JSONResponse(session.describe(), 201)


@router.get("/v1/arc/sessions")
async def list_sessions(request: Request):
    return {"sessions": await manager_of(request).listing(asking(request))}


@router.get("/v1/arc/sessions/{sid}/requests")
async def get_requests(sid: str, request: Request):
    """What each request of the session cost: the conversation's tokens (what plain vLLM
    would have taken), the view's and the budget, prefix-cached tokens, compactions, recalls,
    commands served, engine calls, ARC's own time and the rest (the engine's)."""
    async with manager_of(request).using(sid, asking(request)) as session:
        return list(session.records)


@router.get("/v1/arc/sessions/{sid}")
async def get_session(sid: str, request: Request):
    async with manager_of(request).using(sid, asking(request)) as session:
        return session.describe()


@router.delete("/v1/arc/sessions/{sid}")
async def delete_session(sid: str, request: Request):
    async with manager_of(request).using(sid, asking(request)):
        await manager_of(request).delete(sid)
    metrics.refresh(manager_of(request))
    return {"id": sid, "deleted": True}


@router.get("/v1/arc/sessions/{sid}/observations/{oid}")
async def get_observation(sid: str, oid: str, request: Request):
    try:
        async with manager_of(request).using(sid, asking(request)) as session:
            record = session.store.get(oid)
    except UnknownObservation as exc:
        raise SessionError(f"{exc} (session {sid})", 404) from None
    # The exact stored text; metadata in headers so the body is the observation itself. The
    # signature is the client's text (tool arguments with newlines, any Unicode): percent-encoded
    # (RFC 3986; ``urllib.parse.unquote`` reads it), never raw in a header.
    return Response(record.content.encode("utf-8"), media_type="text/plain; charset=utf-8",
                    headers={"X-ARC-Id": record.id, "X-ARC-Step": str(record.step),
                             "X-ARC-Signature": header_text(record.signature[:200])})


@router.get("/v1/arc/sessions/{sid}/catalog")
async def get_catalog(sid: str, request: Request, page: int = 1):
    async with manager_of(request).using(sid, asking(request)) as session:
        context = session.context
        if context is None:
            return {"page": 1, "pages": 1, "text": "", "ids": []}
        if not 1 <= page <= context.catalog.num_pages:
            raise SessionError(f"page: {page} is not in 1..{context.catalog.num_pages}")
        return {"page": page, "pages": context.catalog.num_pages,
                "ids": context.catalog.page_ids(page), "text": context.catalog.render(page)}


def capabilities(app) -> dict:
    """What ARC serves on this server, for ``/v1/models``."""
    from arc_vllm.serving.apis.messages_compaction import EDIT_TYPES

    config = app.state.arc_sessions.config(None)
    return {"context_window": config.context_window, "input_budget_tokens": config.input_budget_tokens,
            "compaction": {"client_turns": app.state.arc_options.client_compaction,
                           "handoff_tokens": config.handoff_budget_tokens,
                           "responses": ["POST /v1/responses/compact", "context_management: compaction",
                                         "compaction_trigger"],
                           "anthropic_edits": list(EDIT_TYPES)}}


async def models_with_arc(request: Request):
    """vLLM's ``GET /v1/models``, each card with what ARC serves."""
    listed = (await request.app.state.openai_serving_models.show_available_models()).model_dump()
    arc = capabilities(request.app)
    for card in listed.get("data") or []:
        card["arc"] = arc
    return JSONResponse(listed)


def in_front(app, path: str, method: str, make) -> bool:
    """Put ``make(route)`` in front of the app's ``method`` route at ``path`` (so it answers
    first, and hands on what it does not take); whether the app has such a route. The one
    place ARC's routes are put ahead of vLLM's."""
    for index, route in enumerate(app.router.routes):
        if getattr(route, "path", None) == path and method in getattr(route, "methods", ()):
            app.router.routes.insert(index, make(route))
            return True
    return False


def put_models_in_front(app) -> None:
    from starlette.routing import Route

    in_front(app, "/v1/models", "GET", lambda route: Route("/v1/models", models_with_arc, methods=["GET"]))


def put_in_front(app, api) -> bool:
    """ARC's route for ``api`` in front of each of vLLM's POST routes it adapts; whether vLLM
    serves them (a model without that API serves none)."""
    from arc_vllm.serving.api_route import ArcRoute

    found = [in_front(app, path, "POST", lambda route: ArcRoute(route, api)) for path in api.paths]
    return any(found)


def stand_alone(app, api) -> None:
    """ARC's route for an API vLLM does not serve (``POST /v1/responses/compact``): a request ARC
    does not take (implicit sessions off and none named) gets a 400 that says how to ask."""
    from starlette.routing import Route

    from arc_vllm.serving.api_route import ArcRoute

    async def not_arc(request: Request) -> Response:
        return api.error(f"{api.paths[0]} is served for ARC sessions: name one (X-ARC-Session or "
                         "vllm_xargs.arc_session), or serve with --arc-implicit-sessions on", 400)

    for path in api.paths:
        app.router.routes.insert(0, ArcRoute(Route(path, not_arc, methods=["POST"]), api))


class AnthropicKey:
    """Anthropic's clients (its SDK, Claude Code with ``ANTHROPIC_API_KEY``) send their key as
    ``x-api-key``; vLLM's ``--api-key`` check reads ``Authorization: Bearer`` only. On the
    Messages routes, a request with no Authorization gets one from its ``x-api-key``, before
    vLLM's check (outermost), so one key serves both kinds of client. Installed only under
    ``--api-key``: without it no header changes (the caller's identity stays as stored)."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope.get("type") == "http" and scope.get("path", "").startswith("/v1/messages"):
            headers = scope.get("headers") or []
            key = next((value for name, value in headers if name == b"x-api-key"), None)
            if key and not any(name == b"authorization" for name, _ in headers):
                scope = dict(scope, headers=[*headers, (b"authorization", b"Bearer " + key)])
        await self.app(scope, receive, send)


def accept_anthropic_keys(app) -> None:
    """Wrap the app's whole middleware stack in ``AnthropicKey`` when it is built."""
    from vllm import envs

    if not (getattr(app.state.args, "api_key", None) or envs.VLLM_API_KEY):
        return
    build = app.build_middleware_stack
    app.build_middleware_stack = lambda: AnthropicKey(build())


def adapters():
    """The API adapters ARC serves (``serving/apis/``): chat completions (whose error form is
    the default), the others vLLM may serve, and Responses' compaction. Their ``paths`` are the
    one table of which route is which API (the Ray front reads it too)."""
    from arc_vllm.serving.apis.chat import ChatAPI
    from arc_vllm.serving.apis.messages import CountTokensAPI, MessagesAPI
    from arc_vllm.serving.apis.responses import CompactAPI, ResponsesAPI

    return ChatAPI(), [MessagesAPI(), CountTokensAPI(), ResponsesAPI()], CompactAPI()


def attach(app) -> None:
    """Put ARC's routes on vLLM's app, and ARC's route in front of each of vLLM's
    conversational ones (chat completions must be there; the others where vLLM serves them)."""
    from arc_vllm.serving.errors import ErrorForms
    from arc_vllm.serving.apis.responses import ResponsesAPI
    from arc_vllm.serving.inspector_routes import router as inspector_router

    app.include_router(router)
    app.include_router(inspector_router)
    chat, others, compact = adapters()
    # Every ARC route raises its errors; each becomes its status here, once, in its API's form.
    ErrorForms([chat, *others, compact], default=chat).install(app)
    put_models_in_front(app)
    accept_anthropic_keys(app)
    if not put_in_front(app, chat):
        raise RuntimeError("vLLM's app has no POST /v1/chat/completions route to put ARC in front of")
    for api in others:
        if not put_in_front(app, api):
            logger.info("vLLM serves no %s here: ARC takes chat completions only", api.paths[0])
        elif isinstance(api, ResponsesAPI) and not put_in_front(app, compact):
            stand_alone(app, compact)  # compaction is ARC's: vLLM has no route of its own
