"""Server-side ARC sessions: one ArcContext per session, in host memory or in a store folder.

A session owns taking a request's messages in (``take_in``: new messages found by their
fingerprints, the task prefix fixed at the first request, every new observation archived
before anything can hide it) and persisting itself (``save``). A request whose conversation
starts as the session's did but then differs from what the session took in is a rewrite of
its history (Claude Code's ``/compact``, an agent editing its own turns): the session takes
the new history in as its conversation from now on, over the same store, so that everything
stored before stays recallable by id and through the catalog (``rebase``).

With a store folder (``--arc-store-dir``) each session lives in ``DIR/<id>/``: ``store.arc``
(the durable ObsStore, fsync on every append) and ``session.json`` (task prefix, budgets,
the fingerprints of the messages taken in, the request count, the conversation's size
without ARC and the context's state: turns, compaction state, catalog, recalled set), replaced
atomically after each request. On start
every session found there is opened again, so sessions survive a restart (kill -9 included)
with every acknowledged observation. Ids are random; an id of one session never resolves in
another, because each session has its own store.

Sessions are created, found and ended by ``serving/session_manager.py``.

Run ``python -m arc_vllm.serving.sessions DIR`` to list the sessions kept in DIR.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections import deque
from dataclasses import fields
from pathlib import Path

from arc_vllm.core.config import ArcConfig
from arc_vllm.core.context import ArcContext
from arc_vllm.core.formats import ARC_NOTE
from arc_vllm.core.snapshot import restore, snapshot
from arc_vllm.core.store import ObsStore
from arc_vllm.core.transcript import common_prefix, content_text, fingerprints, take_in


MAX_RECORDS = 1000

# A session may ask for a smaller window than the server's (a client sized for a smaller
# model, a benchmark at several windows on one server), never a larger one.
BUDGET_FIELDS = {f.name for f in fields(ArcConfig)}


def rewrites(prints: list[str], known: list[str]) -> bool:
    """Whether a request whose messages have the fingerprints ``prints`` rewrites the history
    of a session that took ``known`` in: the same first message, then a message that differs
    from the one the session has at its place. (A request that starts otherwise carries new
    messages only; one that stops short is a resend.)"""
    if not known or not prints or prints[0] != known[0]:
        return False
    return not continues(prints, known)


def continues(prints: list[str], known: list[str]) -> bool:
    """Whether the request's messages agree with the session's as far as both go (it extends
    the conversation, or resends part of it)."""
    shared = min(len(prints), len(known))
    return prints[:shared] == known[:shared]


def rebases(whole: list[str], known: list[str], held: int, handoff: bool) -> str | None:
    """Whether a request whose conversation has the fingerprints ``whole`` makes a session that
    took ``known`` in take it in anew (``Session.rebase``): ``"handoff"``, a conversation holding
    ARC's handoff that does not continue the session's; ``"rewrite"``, a rewritten history; None
    (and never for a request carrying a compaction handle, ``held``)."""
    if held or not known:
        return None
    if handoff and not continues(whole, known):
        return "handoff"
    return "rewrite" if rewrites(whole, known) else None


def new_from(prints: list[str], known: list[str], held: int = 0, handoff: bool = False) -> int:
    """Where the new messages of a request start (an index into its own messages), for a session
    that took ``known`` in; ``prints``: the request's messages' fingerprints, ``held`` and
    ``handoff`` as for ``Session.take_in``. 0 for a conversation the session takes in whole
    (its first, or a rewrite of its history)."""
    whole = known[:held] + prints
    if not known or whole[:1] != known[:1] or rebases(whole, known, held, handoff):
        return 0
    return max(common_prefix(whole, known), held) - held


def file_stamp(path: Path) -> tuple:
    """Which file ``path`` is now: each save writes a new one (inode, time, size)."""
    status = os.stat(path)
    return status.st_ino, status.st_mtime_ns, status.st_size


class SessionError(ValueError):
    """A bad session request: ``status`` is the HTTP status to answer with."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


class Session:
    def __init__(self, id: str, config: ArcConfig, counter, folder: Path | None,
                 prefix: list[dict] | None = None, fingerprints: list[str] | None = None,
                 full_tokens: int = 0, num_requests: int = 0, tools: list[dict] | None = None,
                 context_state: dict | None = None, caller: str | None = None,
                 records: list[dict] | None = None, client_id: str | None = None,
                 num_rebases: int = 0, last_answer: dict | None = None,
                 handoff_tokens: int = 0, num_handoffs: int = 0, tenant: str | None = None,
                 user: str | None = None):
        self.id = id
        # Whose it is (``ownership.Who``: the key and gateway caller that made it, and the end
        # user that request asserted): where callers are checked only they continue it.
        # ``tenant`` None: made before sessions had an owner (open, as then).
        self.tenant = tenant
        self.user = user
        self.handoff_tokens = handoff_tokens  # ARC's last handoff of it, as a client keeps it
        self.num_handoffs = num_handoffs  # compactions answered from its store
        # One record per ARC request (serving/chat.py ChatStep.end), the last MAX_RECORDS.
        self.records: deque[dict] = deque(records or [], maxlen=MAX_RECORDS)
        self.last_used = time.time()
        self.caller = caller  # an implicit session's index scope (conversation_index.py); None: explicit
        self.client_id = client_id  # the client's own id for the conversation, where it sends one
        self.num_rebases = num_rebases  # rewrites of its history taken in
        self.last_answer: dict | None = last_answer  # the assistant message the client last got
        self.config = config
        self.counter = counter
        self.folder = folder
        self.lock = asyncio.Lock()
        self.store = (ObsStore.open(folder / "store.arc", fsync="always",
                                    head_preview_chars=config.head_preview_chars,
                                    tail_preview_chars=config.tail_preview_chars)
                      if folder else ObsStore(head_preview_chars=config.head_preview_chars,
                                              tail_preview_chars=config.tail_preview_chars))
        self.fingerprints = fingerprints or []
        self.prefix: list[dict] | None = None
        self.full_tokens = full_tokens  # the conversation's size without ARC, beyond F
        self.context: ArcContext | None = None
        self.previous: ArcContext | None = None  # the context a rewritten history follows
        self.previous_handed_off = False
        self.num_requests = num_requests
        # session.json as this process last wrote or read it: a sharing process that finds
        # another file there (each save replaces it) reloads the session.
        self.stamp: tuple | None = None
        if prefix:
            self.start(prefix, tools, context_state)

    def start(self, prefix: list[dict], tools: list[dict] | None = None,
              context_state: dict | None = None) -> None:
        """Fix the task prefix F at the first request: the client's own prefix messages,
        exactly, so that until ARC has to act the prompt is the one plain vLLM would build.
        ARC's note on stubs and commands is shown after F once it has compacted
        (``ArcContext.note``), which keeps F's cached KV. A reopened session gets its context's
        state back (``core.snapshot``): the same view as before."""
        messages = [dict(message) for message in prefix] or [{"role": "user", "content": ""}]
        if context_state is not None:
            self.context = restore(self.config, self.counter, self.store, messages, tools, context_state,
                                   note=ARC_NOTE)
        else:
            self.context = ArcContext(self.config, self.counter, store=self.store, prefix=messages,
                                      tools=tools, note=ARC_NOTE)
        self.prefix = prefix

    def take_in(self, messages: list[dict], tools: list[dict] | None, held: int = 0,
                handoff: bool = False, save: bool = True, prints: list[str] | None = None) -> int:
        """Archive what is new in a request's ``messages``; ``tools`` are the tools the engine
        will render (the request's and ARC's). ``held``: the request carries a compaction
        handle standing for the session's first ``held`` messages, and ``messages`` follow
        it. ``handoff``: its messages hold ARC's handoff of this session (a client compacted
        and kept it): one that does not continue the session's conversation is the client's
        rewritten history, taken in with ARC's view from the start (``rebase``). Returns the
        conversation's size without ARC. Raises ValueError (a bad message, or a task prefix
        that cannot fit) with nothing stored. ``prints``: the messages' fingerprints, where the
        request has them already (``serving/seen_conversations.py``)."""
        prints = self.fingerprints[:held] + (fingerprints(messages) if prints is None else prints)
        why = rebases(prints, self.fingerprints, held, handoff) if self.context is not None else None
        # Tools offered, or tool calls seen before: the user messages are the human's.
        native = bool(tools) or (self.context is not None and self.context.native)
        # Read (and so checked) before anything changes: a bad message rebases nothing.
        fresh = self.context is None or why is not None
        items = take_in(messages, [] if why else self.fingerprints, not fresh, prints=prints, held=held,
                        native=native)
        if why is not None:
            kept = (self.context, self.prefix, self.fingerprints, self.full_tokens, self.num_rebases)
            self.rebase(handed_off=why == "handoff")
        if self.context is None:
            try:
                self.start(items.prefix, tools)
            except ValueError:  # a prefix that cannot fit: the session stays as it was
                if why is not None:
                    self.context, self.prefix, self.fingerprints, self.full_tokens, self.num_rebases = kept
                    self.previous = None
                raise
            if self.previous is not None:  # a rewritten history: the same store, stubs and catalog
                self.context.carry(self.previous, self.previous_handed_off)
                self.previous = None
        else:
            self.context.set_tools(tools)
        context = self.context
        if items.native and not context.native:
            context.native = True
            context.adopt_human_turns()  # its earlier user messages were the human's too
        if handoff:  # the conversation holds ARC's handoff: its view is ARC's (note, catalog)
            context.state.handed_off = True
        # What the conversation would cost without ARC: a running sum over the messages
        # taken in, each counted once as a chat message of the model's template.
        for message in items.new_messages:
            shown = {"role": message.get("role", "user"), "content": content_text(message)}
            if message.get("tool_calls"):
                shown["tool_calls"] = message["tool_calls"]
            self.full_tokens += context.sizer(shown)
        for step in items.steps:
            context.observe(step.action, step.observation, thought=step.thought,
                            returncode=step.returncode, signature=step.signature,
                            style=step.style, call=step.call, group=step.group, role=step.role,
                            reasoning=step.reasoning, human=step.human)
        self.fingerprints = items.fingerprints
        self.num_requests += 1
        if save:
            self.save()
        return context.prefix_tokens + self.full_tokens

    def rebase(self, handed_off: bool = False) -> None:
        """The client rewrote its history: the next request's conversation is the session's
        from now on (its own F, its turns), over the same store. The new context keeps the old
        one's Cited set and catalog (every observation stored before is listed) and, where
        the new history holds ARC's handoff, shows the note and the catalog from the start
        (``ArcContext.carry``); otherwise they show once ARC acts, and until then the view is
        the new conversation as sent."""
        self.previous, self.previous_handed_off = self.context, handed_off
        self.context, self.prefix, self.fingerprints, self.full_tokens = None, None, [], 0
        self.num_rebases += 1

    def state(self) -> dict:
        """What ``session.json`` holds: everything ``from_state`` needs, by name."""
        return {"id": self.id, "config": self.config.to_dict(),
                "prefix": self.prefix, "fingerprints": self.fingerprints,
                "tools": self.context.tools if self.context else None,
                "full_tokens": self.full_tokens, "num_requests": self.num_requests,
                "caller": self.caller, "client_id": self.client_id, "num_rebases": self.num_rebases,
                "tenant": self.tenant, "user": self.user,
                "handoff_tokens": self.handoff_tokens, "num_handoffs": self.num_handoffs,
                "last_answer": self.last_answer,
                "records": list(self.records), "summary": self.summary(),
                "context": snapshot(self.context) if self.context else None}

    @classmethod
    def from_state(cls, state: dict, counter, folder: Path | None) -> "Session":
        """The session ``state`` (``state()``, as ``session.json`` holds it) describes, every
        value passed by name: a parameter added or reordered never shifts a stored value into
        another. Keys a session written by older code lacks take their defaults."""
        session = cls(state["id"], ArcConfig(**state["config"]), counter, folder,
                      prefix=state.get("prefix"), fingerprints=state.get("fingerprints"),
                      full_tokens=state.get("full_tokens", 0), num_requests=state.get("num_requests", 0),
                      tools=state.get("tools"), context_state=state.get("context"),
                      caller=state.get("caller"), records=state.get("records"),
                      client_id=state.get("client_id"), num_rebases=state.get("num_rebases", 0),
                      last_answer=state.get("last_answer"), handoff_tokens=state.get("handoff_tokens", 0),
                      num_handoffs=state.get("num_handoffs", 0), tenant=state.get("tenant"),
                      user=state.get("user"))
        session.last_used = (state.get("summary") or {}).get("last_used", session.last_used)
        return session

    def save(self) -> None:
        if self.folder is None:
            return
        temporary = self.folder / "session.json.tmp"
        temporary.write_text(json.dumps(self.state()))
        os.replace(temporary, self.folder / "session.json")
        self.stamp = file_stamp(self.folder / "session.json")

    def summary(self) -> dict:
        """What a list of sessions shows (also kept in session.json, for an unloaded one)."""
        return {"id": self.id, "observations": len(self.store),
                "turns": len(self.context.turns) if self.context else 0,
                "compactions": self.context.num_compactions if self.context else 0,
                "requests": self.num_requests, "implicit": self.caller is not None,
                "client_id": self.client_id, "rebases": self.num_rebases, "handoffs": self.num_handoffs,
                "apis": sorted({record.get("api", "chat") for record in self.records}),
                "last_used": round(self.last_used, 3)}

    def describe(self) -> dict:
        return {**self.summary(), "occurrences": len(self.store.occurrences),
                "payload_bytes": self.store.num_payload_bytes,
                "recalls": self.context.recall.num_recalls if self.context else 0,
                "durable": self.folder is not None, "budgets": self.config.to_dict(),
                "budget_tokens": self.config.input_budget_tokens}

    def close(self) -> None:
        self.store.close()


if __name__ == "__main__":
    import sys

    for folder in sorted(Path(sys.argv[1]).iterdir()):
        if (folder / "session.json").exists():
            print(folder.name, json.loads((folder / "session.json").read_text())["config"]["context_window"])
