"""The Anthropic Messages API's context management, served by ARC (``apis/messages.py`` calls
these; beta headers ``compact-2026-01-12`` and ``context-management-2025-06-27``):

    context_management.edits[]
      compact_20260112          once the conversation the client holds passes ``trigger``
        trigger, instructions,  (input tokens, default 150,000), a ``compaction`` block leads
        pause_after_compaction  the answer: ``content`` is ARC's handoff (``core/handoff.py``),
                                ``encrypted_content`` ARC's handle; paused, the block alone
                                with ``stop_reason: "compaction"`` (no model call)
      clear_tool_uses_20250919  once past ``trigger`` (input tokens, default 100,000, or tool
        trigger, keep,          uses), the results of tool calls older than the newest
        clear_at_least,         ``keep`` (default 3) are cleared as ARC clears: shown as
        exclude_tools,          their citation stubs, recallable exactly, never deleted; only
        clear_tool_inputs       if at least ``clear_at_least`` tokens go
      clear_thinking_20251015   thinking of assistant turns but the newest ``keep`` (default 1
        keep                    turn; "all" keeps all) left out of the view
    a ``compaction`` block in messages   continues the session: what came before the newest
                                one is the session's, expanded from its store

``context_management.applied_edits`` reports the clearing edits applied, with their counts;
an edit of another type is a 400 in Anthropic's form. ``instructions`` are kept with the
compaction's record: ARC's handoff is written from the store, not by a model.
"""

from __future__ import annotations

from arc_vllm.serving.compaction.ask import EDITS, THRESHOLD, CompactionAsk
from arc_vllm.serving.errors import SessionError

COMPACT, CLEAR_TOOL_USES, CLEAR_THINKING = "compact_20260112", "clear_tool_uses_20250919", "clear_thinking_20251015"
EDIT_TYPES = (COMPACT, CLEAR_TOOL_USES, CLEAR_THINKING)
COMPACT_TRIGGER, CLEAR_TRIGGER, KEEP_TOOL_USES, KEEP_THINKING = 150_000, 100_000, 3, 1
BLOCK = "compaction"


def _count(value, where: str, kind: str, default: int | None) -> int | None:
    """An ``{type: kind, value: N}`` object's N (``default`` when absent)."""
    if value is None:
        return default
    if (not isinstance(value, dict) or value.get("type") != kind or not isinstance(value.get("value"), int)
            or isinstance(value.get("value"), bool) or value["value"] < 0):
        raise SessionError(f"{where}: expected {{\"type\": \"{kind}\", \"value\": <non-negative integer>}}")
    return value["value"]


def take_compaction(body: dict, handles):
    """``body`` without its compaction blocks and ``context_management``; the handle of its
    newest compaction block (None: none) and the edits it asks for (``{type: edit}``)."""
    messages = body.get("messages")
    handle = None
    where = [(m, b) for m, message in enumerate(messages) if isinstance(message, dict)
             and isinstance(message.get("content"), list)
             for b, block in enumerate(message["content"]) if isinstance(block, dict)
             and block.get("type") == BLOCK] if isinstance(messages, list) else []
    if where:  # (a conversation without compaction blocks is passed on as it came: nothing copied)
        live = [(m, b) for m, b in where if messages[m]["content"][b].get("encrypted_content") is not None]
        if live:
            m, b = live[-1]
            handle = handles.read(messages[m]["content"][b]["encrypted_content"],
                                  f"messages[{m}].content[{b}].encrypted_content")
            rest = [block for block in messages[m]["content"][b + 1:] if block.get("type") != BLOCK]
            messages = ([dict(messages[m], content=rest)] if rest else []) + messages[m + 1:]
        # A block with no content is a failed compaction the API treats as a no-op; any other
        # left here came before the newest: the session holds what it stood for.
        messages = [dict(message, content=[block for block in message["content"]
                                           if not (isinstance(block, dict) and block.get("type") == BLOCK)])
                    if isinstance(message, dict) and isinstance(message.get("content"), list) else message
                    for message in messages]
        body = dict(body, messages=messages)
    edits = {}
    management = body.get("context_management")
    if management is not None:
        if not isinstance(management, dict) or not isinstance(management.get("edits", []), list):
            raise SessionError("context_management: must be an object with a list of edits")
        for index, edit in enumerate(management.get("edits", [])):
            kind = edit.get("type") if isinstance(edit, dict) else None
            if kind not in EDIT_TYPES:
                raise SessionError(f"context_management.edits[{index}].type: {str(kind)[:60]!r} is not supported; "
                                   f"ARC serves {', '.join(EDIT_TYPES)}")
            if kind in edits:
                raise SessionError(f"context_management.edits[{index}]: {kind} is given twice")
            edits[kind] = _checked(edit, f"context_management.edits[{index}]")
        body = {key: value for key, value in body.items() if key != "context_management"}
    return body, handle, edits


def _checked(edit: dict, where: str) -> dict:
    """An edit's settings, defaults filled in, each checked."""
    kind = edit["type"]
    if kind == COMPACT:
        pause = edit.get("pause_after_compaction", False)
        if not isinstance(pause, bool):
            raise SessionError(f"{where}.pause_after_compaction: must be a boolean")
        instructions = edit.get("instructions")
        if instructions is not None and not isinstance(instructions, str):
            raise SessionError(f"{where}.instructions: must be a string")
        return {"trigger": _count(edit.get("trigger"), f"{where}.trigger", "input_tokens", COMPACT_TRIGGER),
                "pause": pause, "instructions": instructions}
    if kind == CLEAR_TOOL_USES:
        trigger = edit.get("trigger")
        trigger_kind = trigger.get("type") if isinstance(trigger, dict) else "input_tokens"
        if trigger_kind not in ("input_tokens", "tool_uses"):
            raise SessionError(f"{where}.trigger.type: 'input_tokens' or 'tool_uses'")
        exclude = edit.get("exclude_tools") or []
        if not isinstance(exclude, list) or not all(isinstance(name, str) for name in exclude):
            raise SessionError(f"{where}.exclude_tools: must be a list of tool names")
        inputs = edit.get("clear_tool_inputs", False)
        if not isinstance(inputs, (bool, list)):
            raise SessionError(f"{where}.clear_tool_inputs: a boolean or a list of tool names")
        return {"trigger_kind": trigger_kind,
                "trigger": _count(trigger, f"{where}.trigger", trigger_kind, CLEAR_TRIGGER),
                "keep": _count(edit.get("keep"), f"{where}.keep", "tool_uses", KEEP_TOOL_USES),
                "at_least": _count(edit.get("clear_at_least"), f"{where}.clear_at_least", "input_tokens", 0),
                "exclude": frozenset(exclude)}
    keep = edit.get("keep")
    if keep == "all" or (isinstance(keep, dict) and keep.get("type") == "all"):
        return {"keep": None}
    return {"keep": _count(keep, f"{where}.keep", "thinking_turns", KEEP_THINKING)}


def ask_of(edits: dict, handles, caller: str, handle) -> CompactionAsk | None:
    """The compaction and context edits a request asks for (None: none)."""
    if not edits:
        return None
    compact = edits.get(COMPACT)
    clearing = [lambda context, tokens, kind=kind, settings=settings: apply_edit(kind, settings, context, tokens)
                for kind, settings in edits.items() if kind != COMPACT]
    if compact is None:
        return CompactionAsk(EDITS, handles, caller, since=handle, edits=clearing)
    return CompactionAsk(THRESHOLD, handles, caller, threshold=compact["trigger"], pause=compact["pause"],
                         since=handle, edits=clearing, instructions=compact["instructions"])


def apply_edit(kind: str, settings: dict, context, input_tokens: int) -> dict | None:
    """Apply one clearing edit to ``context`` once its trigger is passed; its
    ``applied_edits`` entry (None: not triggered, or nothing left to clear)."""
    if kind == CLEAR_TOOL_USES:
        uses = sum(1 for turn in context.turns if turn.call is not None)
        reached = uses if settings["trigger_kind"] == "tool_uses" else input_tokens
        if reached < settings["trigger"]:
            return None
        # The cited form clips the call's arguments as it cites the result: clear_tool_inputs holds.
        cleared, tokens = context.clear_tool_results(settings["keep"], settings["exclude"],
                                                     at_least_tokens=settings["at_least"])
        return {"type": CLEAR_TOOL_USES, "cleared_tool_uses": cleared, "cleared_input_tokens": tokens} if cleared else None
    cleared, tokens = context.clear_thinking(settings["keep"])
    return {"type": CLEAR_THINKING, "cleared_thinking_turns": cleared, "cleared_input_tokens": tokens} if cleared else None


def compaction_block(ask: CompactionAsk) -> dict:
    return {"type": BLOCK, "content": ask.handoff.text, "encrypted_content": ask.handle}
