"""Compaction on the serving path: what a request asks of it, and its answer when no model call
is needed. Every compaction a client or a provider's API asks for is ARC's: a handoff written
from the session's store (``core/handoff.py``) and a handle to the session
(``serving/compaction/handle.py``); nothing stored is lost and, unless the server asks the
model (``--arc-client-compaction model``), no token is decoded.

    kind        asked by                                                    answered
    turn        a client's own summary turn (Codex, Claude Code:            the handoff as the
                ``serving/compaction/turns.py``)                             assistant's text, alone
    trigger     ``POST /v1/responses/compact``, a Responses                 one compaction item,
                ``compaction_trigger`` item (Codex's remote compaction)      alone
    threshold   Responses ``context_management`` ``compact_threshold``,    a compaction item or
                Anthropic ``compact_20260112`` (``trigger``)                 block before the model's
                                                                            answer, once the input
                                                                            passes the threshold
                                                                            (alone when paused)
    edits       Anthropic ``clear_tool_uses`` / ``clear_thinking`` alone    the answer, with the
                                                                            edits applied (cleared
                                                                            results cited)

``--arc-client-compaction``: ``arc`` (default) as above; ``model``: a client's turn goes to the
engine as ARC's bounded view with the client's prompt after it, and ARC appends its stubs,
recall line and handle to the model's summary (``appended``); ``pass``: not recognised at all.

The route (``serving/api_route.py``) and the API adapters make a ``CompactionAsk``; the step
(``serving/step/chat.py``) runs it once the request's messages are taken in (``run``), so the
handle stands exactly for what the session holds; a compaction answered alone never reaches
the engine (``alone``; streamed by ``step/stream.py``). A threshold compares the conversation as the client
holds it: the whole conversation, or, after a handle, the handoff and what followed it.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field

from arc_vllm.core.handoff import Handoff, write_appendix, write_handoff
from arc_vllm.serving.compaction.handle import Handle, Handles, caller_tag
from arc_vllm.serving.compaction.turns import (CompactionTurn, answer_text, prompt_of, recognise,
                                              without_prompt)
from arc_vllm.serving.errors import SessionError

TURN, TRIGGER, THRESHOLD = "turn", "trigger", "threshold"
EDITS = "edits"  # context edits only (Anthropic's clear_tool_uses / clear_thinking): no compaction
# --arc-client-compaction: who answers a client's own summary turn
ARC_MODE, MODEL_MODE, PASS_MODE = "arc", "model", "pass"
CLIENT_COMPACTION_MODES = (ARC_MODE, MODEL_MODE, PASS_MODE)


@dataclass
class CompactionAsk:
    kind: str
    handles: Handles
    caller: str                     # ``conversation_keys.caller_of``: the handle is bound to it
    turn: CompactionTurn | None = None
    threshold: int | None = None
    pause: bool = False             # threshold: the compaction alone, no answer (Anthropic's pause)
    since: Handle | None = None     # the handle the request carried, if any
    # Context edits, each ``(context, input_tokens) -> applied entry or None``, run first:
    edits: list = field(default_factory=list)
    instructions: str | None = None  # a client's instructions for the summary (kept in the record)
    # ``--arc-client-compaction model``: the client's prompt, answered by the model from ARC's
    # view; ARC appends its stubs, recall line and handle (``write_appendix``) to the answer.
    model_prompt: dict | None = None
    # Set by ``run``:
    handoff: Handoff | None = None
    handle: str | None = None
    input_tokens: int = 0           # the conversation as the client holds it
    ms: float = 0.0
    applied: list = field(default_factory=list)  # the context edits applied
    decoded_tokens: int = 0         # ``model`` mode: what the model wrote

    @property
    def compacted(self) -> bool:
        return self.handoff is not None

    @property
    def alone(self) -> bool:
        """Answered with the compaction only: no engine call."""
        return self.compacted and (self.kind != THRESHOLD or self.pause) and self.model_prompt is None

    @property
    def as_item(self) -> bool:
        """The answer carries a compaction item (Responses) or block (Messages): a provider
        API's compaction; a client's own turn is answered as text."""
        return self.compacted and self.kind != TURN

    @property
    def item_only(self) -> bool:
        """The answer is the compaction item or block alone."""
        return self.as_item and self.alone

    def run(self, session, context, conversation_tokens: int) -> None:
        """After the request's messages are in ``session`` (its ``context``; the conversation
        ``conversation_tokens`` long as ARC counts it): compact if asked (a threshold only once
        the input passes it), writing the handoff and issuing the handle."""
        started = time.perf_counter()
        self.input_tokens = conversation_tokens
        if self.since is not None:  # the client holds the handoff and what followed it
            self.input_tokens = conversation_tokens - self.since.tokens + session.handoff_tokens
        self.applied = [entry for entry in (edit(context, self.input_tokens) for edit in self.edits) if entry]
        if self.kind == EDITS or (self.kind == THRESHOLD and self.input_tokens <= (self.threshold or 0)):
            self.ms = (time.perf_counter() - started) * 1000
            return
        handle = Handle(session.id, len(session.fingerprints), session.num_rebases, caller_tag(self.caller),
                        conversation_tokens)
        self.handle = self.handles.issue(handle)
        write = write_appendix if self.model_prompt is not None else write_handoff
        self.handoff = write(context, budget_tokens=context.config.handoff_budget_tokens, handle=self.handle)
        session.handoff_tokens = self.handoff.tokens
        session.num_handoffs += 1
        self.ms = (time.perf_counter() - started) * 1000

    def text(self) -> str:
        """The answer's text in the form the client expects (a summary turn's), else the handoff."""
        return answer_text(self.turn, self.handoff.text) if self.turn is not None else self.handoff.text

    def record(self) -> dict:
        """What ARC did, for ``arc.compaction`` (and ``arc.client_compaction`` for a client's turn)."""
        record = {"kind": self.kind, "compacted": self.compacted, "input_tokens": self.input_tokens,
                  "decoded_tokens": self.decoded_tokens, "ms": round(self.ms, 2),
                  "written_by": "model" if self.model_prompt is not None else "arc"}
        if self.turn is not None:
            record.update(client=self.turn.client, form=self.turn.form)
        if self.threshold is not None:
            record["threshold"] = self.threshold
        if self.applied:
            record["applied_edits"] = self.applied
        if self.instructions:
            record["instructions"] = self.instructions
        if self.handoff is not None:
            record.update(handoff_tokens=self.handoff.tokens, observations=self.handoff.observations,
                          listed=len(self.handoff.listed), handle=self.handle)
        return record


@dataclass(frozen=True)
class Continuation:
    """What a request continues from a compaction: the session, the handle, and how."""

    session: str | None = None
    handle: Handle | None = None
    held: int = 0           # the session's messages a carried handle (item, block) stands for
    handoff: bool = False   # the messages hold ARC's handoff text (a client kept it)


NOTHING_CONTINUED = Continuation()  # a request that continues no compaction


def continuation(handles: Handles, translation, caller: str, named: str | None) -> Continuation:
    """The session a request's compaction handle names. A handle the API carries (an item's or
    a block's ``encrypted_content``, read by the adapter) must be this caller's (404: no
    session of yours, as for an unknown one); one in a handoff's text (a client that compacted
    on its own kept ARC's answer) routes the request to its session where no other is named,
    and is ignored when it is not this caller's (a text may quote anything)."""
    handle = translation.handle
    if handle is not None:
        if handle.caller != caller_tag(caller):
            raise SessionError("compaction handle: no session of this caller's (it was issued to "
                               "another API key or user)", 404)
        if named is not None and named != handle.session:
            raise SessionError(f"compaction handle: it continues session {handle.session}, not the "
                               f"session named ({named})")
        return Continuation(handle.session, handle, held=handle.position)
    for message in reversed(translation.chat["messages"]):  # the newest handoff the client kept
        if message.get("role") not in ("user", "system", "developer"):
            continue
        text = message.get("content")
        text = text if isinstance(text, str) else "\n".join(
            part.get("text") for part in text or [] if isinstance(part, dict) and isinstance(part.get("text"), str))
        found = handles.find(text) if Handles.holds_text_handle(text) else None
        if found is not None and found.caller == caller_tag(caller) and named in (None, found.session):
            return Continuation(found.session, found, handoff=True)
    return Continuation()


def check_current(continued: Continuation, session) -> None:
    """A carried handle stands for the session as it was: still its history (409 otherwise)."""
    handle = continued.handle
    if handle is None or not continued.held:
        return
    if handle.generation != session.num_rebases or handle.position > len(session.fingerprints):
        raise SessionError(f"compaction handle: stale: session {session.id}'s history was rewritten "
                           "after it was issued; send the conversation whole, or the newest handle", 409)


def client_turn(mode: str, handles: Handles, headers: dict, body: dict, translation,
                caller: str) -> CompactionAsk | None:
    """A client's own compaction turn (``compaction/turns.py``), answered by ARC unless the
    server passes them to the model (``--arc-client-compaction pass``); its prompt taken out
    of the messages ARC archives."""
    if mode == PASS_MODE:
        return None
    turn = recognise(headers, body, translation.chat["messages"])
    if turn is None:
        return None
    prompt = prompt_of(translation.chat["messages"], turn) if mode == MODEL_MODE else None
    translation.chat["messages"] = without_prompt(translation.chat["messages"], turn)
    return CompactionAsk(TURN, handles, caller, turn=turn, since=translation.handle, model_prompt=prompt)


def appended(ask: CompactionAsk | None) -> str:
    """What ARC adds to the model's answer (``model`` mode: stubs, recall line, handle)."""
    if ask is None or ask.model_prompt is None or not ask.compacted:
        return ""
    return "\n\n" + ask.handoff.text


def completion_alone(text: str, model: str, completion_tokens: int, arc: dict) -> dict:
    """The chat completion of a compaction answered alone: ``text``, ARC's ``arc`` object on it."""
    return {"id": f"chatcmpl-arc-{secrets.token_hex(12)}", "object": "chat.completion",
            "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 0, "completion_tokens": completion_tokens,
                      "total_tokens": completion_tokens}, "arc": arc}
