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

Used by ``serving.sessions`` so that a session reopened by another process (a restart, another
API server, another replica) continues with the same view, and so the same prefix-cached KV.
"""

from __future__ import annotations

from dataclasses import asdict

from arc_vllm.core.compaction import CompactionState
from arc_vllm.core.turn import ToolCall, Turn

VERSION = 1


def snapshot(context) -> dict:
    recall = context.recall
    return {
        "version": VERSION,
        "turns": [asdict(turn) for turn in context.turns],
        "state": asdict(context.state),
        "step": context.step,
        "forms": [[index, form] for index, form in sorted(context._forms.items())],
        "catalog": {"entries": list(context.catalog.entries), "current": context.catalog.current},
        "cited": sorted(context.book.cited),
        "materialized": [[id, chunk, text] for (id, chunk), text in recall.materialized.items()],
        "recall": {"step": recall._step, "this_step": recall._recalls_this_step,
                   "num_recalls": recall.num_recalls, "num_refused": recall.num_refused},
        "counts": {"proactive": context.num_proactive, "reactive": context.num_reactive,
                   "forced": context.num_forced, "last_tokens": getattr(context, "_last_tokens", None)},
    }


def turn_of(data: dict) -> Turn:
    call = data.get("call")
    return Turn(**{**data, "call": ToolCall(**call) if call else None})


def restore(config, counter, store, prefix: list[dict], tools: list[dict] | None, state: dict,
            note: str = ""):
    """A new ArcContext over ``store`` with ``state`` (from ``snapshot``) put back."""
    from arc_vllm.core.context import ArcContext

    if state.get("version") != VERSION:
        raise ValueError(f"context snapshot version {state.get('version')!r}; this arc-vllm reads {VERSION}")
    context = ArcContext(config, counter, store=store, prefix=prefix, tools=tools, note=note)
    context.turns = [turn_of(turn) for turn in state["turns"]]
    context.state = CompactionState(**state["state"])
    context.step = state["step"]
    context._forms = {int(index): form for index, form in state["forms"]}
    catalog = context.catalog
    catalog.entries = list(state["catalog"]["entries"])
    catalog._position = {id: position for position, id in enumerate(catalog.entries)}
    catalog.current = state["catalog"]["current"]
    # An observation stored after the snapshot was taken (a crash in between) has no turn:
    # it is reached through the catalog, as every observation of a reopened store is.
    in_turns = {turn.obs_id for turn in context.turns if turn.obs_id}
    for id in store.ids():
        if id not in catalog and id not in in_turns:
            catalog.add(id)
    context.book.cited = set(state["cited"])
    recall = context.recall
    recall.materialized.clear()
    for id, chunk, text in state["materialized"]:
        recall.materialized[(id, chunk)] = text
    recall._step, recall._recalls_this_step = state["recall"]["step"], state["recall"]["this_step"]
    recall.num_recalls, recall.num_refused = state["recall"]["num_recalls"], state["recall"]["num_refused"]
    counts = state["counts"]
    context.num_proactive, context.num_reactive, context.num_forced = (
        counts["proactive"], counts["reactive"], counts["forced"])
    if counts.get("last_tokens") is not None:
        context._last_tokens = counts["last_tokens"]
    return context
