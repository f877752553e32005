"""One server-side ARC session: its ArcContext over its ObsStore, what it took in, and its records.

A session owns taking a request's messages in (``take_in``: new messages found by their
fingerprints, the task prefix fixed at the first request, every new observation archived
before anything can hide it). A request whose conversation starts as the session's did but
then differs from what the session took in is a rewrite of its history (Claude Code's
``/compact``, an agent editing its own turns): the session takes the new history in as its
conversation from now on, over the same store, so that everything stored before stays
recallable by id and through the catalog (``rebase``).

Its state is declared once: the fields of ``Session`` marked ``saved`` are what its storage
keeps (``state()`` writes them by name with the tools, the context's snapshot and a summary;
``from_state`` reads them by name, a key written by older code missing taking its default).
The parts of that state that only grow (``PARTS``: the fingerprints, the records, the
context's turns, catalog order and Cited set) can be kept apart from the rest (``rest()``,
``growing()``; ``split_state``/``join_state`` for a whole state), so a store that appends them
writes per request only what is new. Where it lives is its storage's
(``sessions/storage.py``: host memory, a folder, Redis): ``save`` marks the state changed and
``commit`` hands it over (once per request, at its end), and its store is the one the storage
opens (a durable file, fsync on every append, for a folder). Ids are random; an id of one
session never resolves in another, because each session has its own store.

Sessions are created, found and ended by ``serving/sessions/manager.py``.

Run ``python -m arc_vllm.serving.sessions.session DIR`` to list the sessions kept in DIR.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import deque
from dataclasses import InitVar, dataclass, field, fields
from pathlib import Path

from arc_vllm.core.config import ArcConfig
from arc_vllm.core.context import ArcContext
from arc_vllm.core.formats import ARC_NOTE
from arc_vllm.core.snapshot import restore, snapshot
from arc_vllm.core.store import ObsStore
from arc_vllm.core.transcript import content_text, fingerprints, first_new, take_in


MAX_RECORDS = 1000


@dataclass(frozen=True)
class Part:
    """One part of a session's state that only grows while its context lives: a list in
    ``state()`` at ``place``, which a storage may append to instead of rewriting. This table is
    the one place the parts are named: ``split_state``/``join_state``, the per-request changes
    (``sessions/parts.py``) and Redis's keys and commit script (``sessions/redis_store.py``)
    all read it."""

    name: str
    place: tuple[str, ...]  # the keys leading to it in ``state()``
    key: str                # its suffix among a store's keys of the session
    kind: str = "list"      # "list": appended; "ring": its last MAX_RECORDS; "set": added to, written sorted
    json: bool = False      # items kept as JSON text (a turn's snapshot, a record); else as text


PARTS = (Part("fingerprints", ("fingerprints",), "fp"),
         Part("records", ("records",), "rec", kind="ring", json=True),
         Part("turns", ("context", "turns"), "turns", json=True),
         Part("catalog", ("context", "catalog", "entries"), "cat"),
         Part("cited", ("context", "cited"), "cited", kind="set"))
PART = {part.name: part for part in PARTS}

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
    same = first_new(whole, known, held)
    return 0 if same is None or rebases(whole, known, held, handoff) else same - held


def saved(default=None, factory=None, help: str = ""):
    """A field its storage keeps (``Session.state``), with its default for older states."""
    if factory is not None:
        return field(default_factory=factory, metadata={"saved": True, "help": help})
    return field(default=default, metadata={"saved": True, "help": help})


@dataclass(eq=False)
class Session:
    id: str
    config: ArcConfig
    counter: object                      # the serving model's token counter
    storage: object = None               # where it lives beyond memory (``sessions/storage.py``); None: memory
    # What its storage keeps, by name:
    prefix: list[dict] | None = saved(help="the task prefix F, as the client sent it")
    fingerprints: list[str] = saved(factory=list, help="of every message taken in, in order")
    full_tokens: int = saved(0, help="the conversation's size without ARC, beyond F")
    num_requests: int = saved(0)
    caller: str | None = saved(help="an implicit session's index scope (conversation_index.py); None: explicit")
    client_id: str | None = saved(help="the client's own id for the conversation, where it sends one")
    num_rebases: int = saved(0, help="rewrites of its history taken in")
    # Whose it is (``ownership.Who``: the key and gateway caller that made it, and the end user
    # that request asserted): where callers are checked only they continue it. ``tenant`` None:
    # made before sessions had an owner (open, as then).
    tenant: str | None = saved()
    user: str | None = saved()
    handoff_tokens: int = saved(0, help="ARC's last handoff of it, as a client keeps it")
    num_handoffs: int = saved(0, help="compactions answered from its store")
    last_answer: dict | None = saved(help="the assistant message the client last got")
    records: deque = saved(factory=deque, help="one per ARC request (step/chat.py), the last MAX_RECORDS")
    last_used: float = saved(factory=time.time, help="wall-clock time of its last request")
    # Rebuilt, not kept as fields: the tools and the context come back through ``start``.
    tools: InitVar[list[dict] | None] = None
    context_state: InitVar[dict | None] = None
    # In this process only:
    store: ObsStore = field(init=False)
    context: ArcContext | None = field(init=False, default=None)
    previous: ArcContext | None = field(init=False, default=None)  # the context a rewritten history follows
    previous_handed_off: bool = field(init=False, default=False)
    lock: asyncio.Lock = field(init=False, default_factory=asyncio.Lock)
    unsaved: bool = field(init=False, default=False)  # changed since its storage last took it

    def __post_init__(self, tools, context_state) -> None:
        self.records = deque(self.records or [], maxlen=MAX_RECORDS)
        self.fingerprints = list(self.fingerprints or [])
        self.store = (self.storage.open_store(self) if self.storage is not None else
                      ObsStore(head_preview_chars=self.config.head_preview_chars,
                               tail_preview_chars=self.config.tail_preview_chars))
        if self.prefix:
            self.start(self.prefix, tools, context_state)

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
        request has them already (``serving/sessions/seen_conversations.py``)."""
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
            context.hand_off()
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
        """What its storage keeps: every ``saved`` field by name, the tools and the context's
        snapshot (``core/snapshot.py``), and the summary a listing shows of an unloaded one."""
        state = self.rest()
        state.update(fingerprints=self.fingerprints, records=list(self.records),
                     context=snapshot(self.context) if self.context else None)
        return state

    def rest(self) -> dict:
        """``state()`` without its growing parts (``PARTS``), which are not even written out:
        bounded by the budgets, whatever the session's length."""
        state = {spec.name: getattr(self, spec.name) for spec in fields(self)
                 if spec.metadata.get("saved") and spec.name not in PART}
        state.update(id=self.id, config=self.config.to_dict(), tools=self.context.tools if self.context else None,
                     summary=self.summary(), context=snapshot(self.context, growing=False) if self.context else None)
        return state

    def growing(self) -> dict:
        """The growing parts of its state as the live collections (``state()`` writes them as
        lists; ``cited`` is a set there written sorted). A context not started has none of its own."""
        context = self.context.growing() if self.context else {"turns": [], "catalog": [], "cited": set()}
        return {"fingerprints": self.fingerprints, "records": self.records, **context}

    @classmethod
    def from_state(cls, state: dict, counter, storage=None) -> "Session":
        """The session ``state`` (``state()``) describes, every value by name: a field added or
        reordered never shifts a stored value into another, and one a session written by older
        code lacks takes its default (its last use, once only in the summary, is read there)."""
        given = {spec.name: state[spec.name] for spec in fields(cls)
                 if spec.metadata.get("saved") and state.get(spec.name) is not None}
        if "last_used" not in given and (state.get("summary") or {}).get("last_used") is not None:
            given["last_used"] = state["summary"]["last_used"]
        return cls(state["id"], ArcConfig(**state["config"]), counter, storage, tools=state.get("tools"),
                   context_state=state.get("context"), **given)

    def save(self) -> None:
        """Its state changed: its storage takes it at the request's end (``commit``)."""
        self.unsaved = True

    async def commit(self) -> None:
        """Hand what changed to its storage, all or nothing (``SessionStorage.commit``); once:
        a commit that failed is not tried again (its storage reloads the session instead)."""
        unsaved, self.unsaved = self.unsaved, False
        if unsaved and self.storage is not None:
            await self.storage.commit(self)

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
                "durable": bool(getattr(self.storage, "durable", False)), "budgets": self.config.to_dict(),
                "budget_tokens": self.config.input_budget_tokens}

    def close(self) -> None:
        self.store.close()


def part_item(name: str, item):
    """One item of a growing part as its state writes it (a turn's snapshot form; else itself)."""
    return item.state() if name == "turns" else item


def split_state(state: dict) -> tuple[dict, dict]:
    """A whole ``state()`` as (its rest, its growing parts as lists): ``join_state`` undoes it."""
    rest = json.loads(json.dumps(state))
    parts = {}
    for part in PARTS:
        *path, last = part.place
        holder = rest
        for key in path:
            holder = holder.get(key) if isinstance(holder, dict) else None
        parts[part.name] = list(holder.pop(last, []) or []) if isinstance(holder, dict) else []
    return rest, parts


def join_state(rest: dict, parts: dict) -> dict:
    """The whole state of ``rest`` and its growing ``parts`` (``split_state``'s inverse; a part
    of a context that was not started is dropped with it)."""
    state = dict(rest)
    for part in PARTS:
        *path, last = part.place
        holder = state
        for key in path:  # copied on the way down: ``rest`` is left as it was
            if holder.get(key) is None:
                break
            holder[key] = dict(holder[key])
            holder = holder[key]
        else:
            items = parts.get(part.name, [])
            holder[last] = sorted(items) if part.kind == "set" else list(items)
    return state


if __name__ == "__main__":
    import sys

    for folder in sorted(Path(sys.argv[1]).iterdir()):
        if (folder / "session.json").exists():
            print(folder.name, json.loads((folder / "session.json").read_text())["config"]["context_window"])
