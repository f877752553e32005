"""Read-only routes for looking into a session, and the inspector page.

    GET /v1/arc/sessions/{sid}/view        the view as the model saw it: messages, tokens,
                                           budget, the stored ids its stubs name, and which
                                           messages hold the user's own words
    GET /v1/arc/sessions/{sid}/timeline    the timeline of its requests, as SVG
    GET /v1/arc/sessions/{sid}/search?q=   stored observations containing q (id, signature, snippet)
    GET /v1/arc/ui[?session=<sid>]         the inspector page (only with --arc-ui)

The JSON and SVG routes sit behind vLLM's middleware like every other route (``--api-key``
applies). The page's HTML shell carries no data (``inspector/page.py``), so it is served
ahead of the API-key check: a browser can open it, the page asks for the key, and its script
sends the key with each fetch. Nothing here changes a session: the view is built from the
state the last engine call's render left (``ArcContext.current_view``), whose stubs that render
cited already.
"""

from __future__ import annotations

import json
import re

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from arc_vllm.inspector.page import shell_html
from arc_vllm.inspector.timeline import timeline_svg
from arc_vllm.serving.sessions.ownership import asking
from arc_vllm.serving.errors import SessionError

router = APIRouter()
UI_PATH = "/v1/arc/ui"
SEARCH_LIMIT = 50
SNIPPET_CHARS = 80
STUB = re.compile(r"§([0-9a-f]{6,40})")


async def read(request: Request, sid: str, reader):
    """``reader(session)`` on the session held for this request (a missing or busy session
    raises, and ``routes.attach``'s handlers answer it)."""
    async with request.app.state.arc_sessions.using(sid, asking(request)) as session:
        return reader(session)


@router.get("/v1/arc/sessions/{sid}/view")
async def get_view(sid: str, request: Request):
    def view(session):
        if session.context is None:
            return {"messages": [], "tokens": 0, "budget_tokens": session.config.input_budget_tokens}
        current = session.context.current_view()
        # The stubs it shows: ids in the text that name a stored observation (ARC's note
        # shows an example id, and a client's own text may hold anything after a §).
        shown = STUB.findall(json.dumps(current.messages, ensure_ascii=False))
        humans = current.human_turns
        return {"messages": current.messages, "tokens": current.tokens,
                "budget_tokens": current.budget_tokens, "compacted": session.context.has_acted,
                "stubs": sorted({id for id in shown if id in session.store}),
                # The messages holding the user's own words (W, and H's human turns), and how many
                # of them are whole, shortened to their head, left out (``core/human_turns.py``).
                "human_messages": humans.get("messages", []),
                "human_turns": {name: humans.get(name, 0) for name in ("verbatim", "shortened", "left_out")}}

    return await read(request, sid, view)


@router.get("/v1/arc/sessions/{sid}/timeline")
async def get_timeline(sid: str, request: Request):
    def timeline(session):
        svg = timeline_svg(list(session.records), session.config.input_budget_tokens,
                           f"session {session.id}: {session.num_requests} requests")
        return Response(svg, media_type="image/svg+xml")

    return await read(request, sid, timeline)


@router.get("/v1/arc/sessions/{sid}/search")
async def search(sid: str, request: Request, q: str = "", limit: int = SEARCH_LIMIT):
    if not q:
        raise SessionError("q: give the text to find")
    if not 1 <= limit <= 1000:
        raise SessionError("limit: must be in 1..1000")
    needle = q.lower()

    def found(session):
        results = []
        for record in session.store.records():
            where = record.content.lower().find(needle)
            if where < 0 and needle not in record.signature.lower():
                continue
            start = max(0, where - SNIPPET_CHARS)
            snippet = record.content[start:where + len(q) + SNIPPET_CHARS] if where >= 0 else ""
            results.append({"id": record.id, "signature": record.signature, "step": record.step,
                            "chars": record.chars, "snippet": snippet})
            if len(results) == limit:
                break
        return {"query": q, "results": results}

    return await read(request, sid, found)


class UiShell:
    """ASGI middleware, outermost: GET /v1/arc/ui answers the page's shell (no data in it)
    before vLLM's API-key middleware; everything else passes through."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope["path"] == UI_PATH and scope["method"] in ("GET", "HEAD"):
            await HTMLResponse(shell_html(), headers={"Cache-Control": "no-store"})(scope, receive, send)
            return
        await self.app(scope, receive, send)


def attach_ui(app) -> None:
    """Serve the inspector page (``--arc-ui``). vLLM adds its middleware (the API-key check
    among it) after the endpoint plugins attach, so ``add_middleware`` here would sit inside
    the key check; the shell instead wraps the whole stack when Starlette builds it."""
    build = app.build_middleware_stack
    app.build_middleware_stack = lambda: UiShell(build())
