"""An ArcContext's state as JSON, and back: what is needed besides its store to rebuild the
exact view it would render.

The store holds every observation; this holds the rest: the turns (with their tool calls),
the compaction state (S's boundary and forms), the forms of turns in H, the catalog's order and
page, the Cited set, the recalled set U (ids, chunks and texts, in LRU order), the recall
controller's per-step count and the counters. Caches (stubs, chunk bounds, sized messages) are
left out: they are recomputed, identically, from the store.

    state = snapshot(context)                       # plain JSON types
    context = restore(config, counter, store, prefix, tools, state)
    assert context.render().messages == original.render().messages

Used by ``serving.sessions.session`` so that a session reopened by another process (a restart, another
API server, another replica) continues with the same view, and so the same prefix-cached KV.
"""

from __future__ import annotations

VERSION = 1


def snapshot(context, growing: bool = True) -> dict:
    """``context``'s state as plain JSON types, with this format's version. Each class writes
    its own part (``ArcContext.snapshot``, ``Catalog.state``, ``CitationBook.state``,
    ``RecallController.state``); a key added to one must keep version 1 readable, or raise
    VERSION with a reader of the old form (a stored snapshot, ``tests/fixtures/stored_sessions``,
    reloads in every later version). Without ``growing``: the parts that only grow are left
    out (``ArcContext.growing``), for a store that appends them."""
    return {"version": VERSION, **context.snapshot(growing)}


def restore(config, counter, store, prefix: list[dict], tools: list[dict] | None, state: dict,
            note: str = ""):
    """A new ArcContext over ``store`` with ``state`` (from ``snapshot``) put back."""
    from arc_vllm.core.context import ArcContext

    if state.get("version") != VERSION:
        raise ValueError(f"context snapshot version {state.get('version')!r}; this arc-vllm reads {VERSION}")
    return ArcContext.from_snapshot(config, counter, store, prefix, tools, state, note)
