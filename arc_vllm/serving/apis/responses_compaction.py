"""The Responses API's compaction, served by ARC (``apis/responses.py`` calls these):

    POST /v1/responses/compact            ``CompactAPI``: the SDK's ``responses.compact``; answers
                                          ``{object: "response.compaction", output: [the input's
                                          user messages..., one compaction item]}``
    input [..., {type: compaction_trigger}]   Codex's remote compaction: the response's output is
                                          exactly one compaction item
    context_management: [{type: "compaction", compact_threshold: N}]
                                          once the conversation the client holds passes N tokens,
                                          a compaction item leads the output, then the answer
    input [..., {type: compaction, encrypted_content}, new items...]
                                          continues the session: what came before the newest
                                          compaction item is the session's, expanded from its
                                          store (the items before it may be dropped or sent)

A compaction item is ``{type: "compaction", id, encrypted_content}``; ``encrypted_content`` is
ARC's handle (``serving/compaction/handle.py``). The handoff text (``core/handoff.py``) rides
``arc.compaction`` for a client that wants to show it; the item stays opaque, as OpenAI's is.
"""

from __future__ import annotations

import secrets
import time

from arc_vllm.serving.apis import Translation
from arc_vllm.serving.compaction.ask import THRESHOLD, TRIGGER, CompactionAsk
from arc_vllm.serving.errors import SessionError

COMPACTION, TRIGGER_ITEM = "compaction", "compaction_trigger"


def is_item(item, kind: str) -> bool:
    return isinstance(item, dict) and item.get("type") == kind


def take_compaction(body: dict, handles) -> tuple[dict, object, bool, dict | None]:
    """``body`` without its compaction parts; the handle of its newest compaction item (None:
    none), whether it ends in a ``compaction_trigger``, and its ``context_management`` entry."""
    items = body.get("input")
    handle, trigger = None, False
    if isinstance(items, list):
        if items and is_item(items[-1], TRIGGER_ITEM):
            trigger, items = True, items[:-1]
        if any(is_item(item, TRIGGER_ITEM) for item in items):
            raise SessionError("input: a compaction_trigger item must be the last input item")
        newest = max((index for index, item in enumerate(items) if is_item(item, COMPACTION)), default=None)
        if newest is not None:
            handle = handles.read(items[newest].get("encrypted_content"), f"input[{newest}].encrypted_content")
            items = items[newest + 1:]
        body = dict(body, input=items)
    management = body.get("context_management")
    entry = None
    if management is not None:
        if not isinstance(management, list) or not all(isinstance(item, dict) for item in management):
            raise SessionError("context_management: must be a list of objects")
        for index, item in enumerate(management):
            if item.get("type") != COMPACTION:
                raise SessionError(f"context_management[{index}].type: {str(item.get('type'))[:40]!r} is not "
                                   "supported; the one type is 'compaction'")
            threshold = item.get("compact_threshold")
            if threshold is not None and (not isinstance(threshold, int) or isinstance(threshold, bool)
                                          or threshold < 1):
                raise SessionError(f"context_management[{index}].compact_threshold: a positive integer "
                                   "of tokens, or null")
            entry = item
        body = {key: value for key, value in body.items() if key != "context_management"}
    return body, handle, trigger, entry


def ask_of(translation: Translation, app, caller: str, trigger: bool, entry: dict | None,
           compact_endpoint: bool) -> CompactionAsk | None:
    """The compaction the request asks for (None: none)."""
    handles = app.state.arc_handles
    if trigger or compact_endpoint:
        return CompactionAsk(TRIGGER, handles, caller, since=translation.handle)
    if entry is not None:
        threshold = entry.get("compact_threshold")
        if threshold is None:  # no threshold named: compact when the conversation no longer fits
            threshold = app.state.arc_sessions.config(None).input_budget_tokens
        return CompactionAsk(THRESHOLD, handles, caller, threshold=threshold, since=translation.handle)
    return None


def compaction_item(ask: CompactionAsk) -> dict:
    return {"type": COMPACTION, "id": f"cmp_{secrets.token_hex(12)}", "encrypted_content": ask.handle}


def user_items(items) -> list[dict]:
    """The user messages among a request's input items, as output items: complete, with their
    ``id`` (the item's own, else a new one) and ``status``, as the Open Responses schema asks."""
    if isinstance(items, str):
        items = [{"role": "user", "content": items}]
    kept = []
    for item in items or []:
        if isinstance(item, dict) and item.get("role") == "user" and item.get("type", "message") == "message":
            content = item.get("content")
            content = [{"type": "input_text", "text": content}] if isinstance(content, str) else content
            id = item.get("id") if isinstance(item.get("id"), str) else f"msg_{secrets.token_hex(12)}"
            kept.append({"id": id, "type": "message", "role": "user", "content": content, "status": "completed"})
    return kept


def compacted_response(translation: Translation, result: dict) -> dict:
    """``POST /v1/responses/compact``'s answer: the input's user messages, then ARC's item."""
    arc = result.pop("arc")
    ask = translation.ask
    return {"id": f"resp_cmp_{secrets.token_hex(12)}", "object": "response.compaction",
            "created_at": int(time.time()),
            "output": user_items(translation.extra.get("input")) + [compaction_item(ask)],
            "usage": {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0,
                      "input_tokens_details": {"cached_tokens": 0},
                      "output_tokens_details": {"reasoning_tokens": 0}},
            "arc": arc}
