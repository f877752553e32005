"""All of a server's ARC sessions in one API process: created, found (by id, or by conversation),
held for a request, and ended. Where they live beyond memory is its storage's
(``sessions/storage.py``: host memory, a folder, ...); the manager never asks which.

The manager is a cache over its storage. It keeps sessions in memory, least recently used
first, and the count of requests holding each (a session serving a request is never ended).
Whatever may reach the storage is a coroutine (``start``, ``create``, ``stored``, ``using``,
``get``, ``delete``, ``listing``): a store across the network never stalls the event loop.
A request's changes reach the storage when it ends (``Session.commit``, inside ``using``).
Sessions end: one idle past its TTL (``ttl_s`` when given, for every session; else
``implicit_ttl_s``, a day, for implicit sessions and none for explicit ones, by its last use,
one wall clock), or the least recently used beyond ``max_sessions`` in memory, leaves memory.
A durable storage keeps it: the next request loads it exactly. Without one it is gone, and a
request naming it gets 410 (not 404: the client learns its session ended, and can start
another). With ``store_retention_s`` (``--arc-store-retention``) a stored session unused that
long is removed from the storage too, and answers 410 naming the option. A session id is
checked against the form ARC gives (``sess_`` and 24 hex digits) before any storage looks.

Implicit sessions (a request that names none) are found by their conversation
(``sessions/conversation_index.py``): the client's own id for it where it sends one, else the
fingerprints of its messages, in the index the storage holds for that conversation.

    manager = SessionManager(counter, window, defaults, storage)
    await manager.start()                    # a folder this process owns: its sessions opened
    async with manager.using(id, who, write=True) as session: ...

Run ``python -m arc_vllm.serving.sessions.manager`` to see a session end and answer 410.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass

import anyio

from arc_vllm.core.config import DEFAULT_MAX_TOKENS, ArcConfig
from arc_vllm.serving import metrics
from arc_vllm.serving.errors import SessionError
from arc_vllm.serving.options import ServeOptions
from arc_vllm.serving.sessions.conversation_index import client_scope
from arc_vllm.serving.sessions.ownership import allows
from arc_vllm.serving.sessions.seen_conversations import SeenConversations
from arc_vllm.serving.sessions.session import BUDGET_FIELDS, Session
from arc_vllm.serving.sessions.storage import MAX_ENDED, MemoryStorage

logger = logging.getLogger(__name__)

HELD_S = 600.0  # a shared index's hold on a request's conversation lasts at most this long


@dataclass(frozen=True)
class Routed:
    """An implicit request's session, and the index key it holds while in flight."""

    id: str
    scope: str
    prints: list[str]
    held: str | None
    keys: list[str] | None = None  # chain(scope, prints)


class SessionManager:
    def __init__(self, counter, context_window: int, defaults: dict, storage=None, ttl_s: float | None = None,
                 max_sessions: int | None = ServeOptions.max_sessions, implicit_ttl_s: float = 86400.0,
                 store_retention_s: float | None = None):
        if ttl_s is not None and ttl_s <= 0:
            raise ValueError(f"--arc-session-ttl: must be > 0 seconds (got {ttl_s})")
        self.storage = storage if storage is not None else MemoryStorage()
        if store_retention_s is not None and (store_retention_s <= 0 or not self.storage.durable):
            raise ValueError(f"--arc-store-retention: must be > 0 seconds, with --arc-store "
                             f"(got {store_retention_s}, {'a store' if self.storage.durable else 'no store'})")
        if max_sessions is not None and max_sessions < 1:
            raise ValueError(f"--arc-max-sessions: must be >= 1 (got {max_sessions})")
        self.counter = counter
        self.context_window = context_window
        self.defaults = defaults
        self.ttl_s = ttl_s
        self.implicit_ttl_s = implicit_ttl_s
        self.max_sessions = max_sessions
        self.store_retention_s = store_retention_s
        # In memory, least recent first. Not a cachetools cache: a session serving a request is
        # never ended, and idle TTLs differ per session; ``sweep`` says both.
        self.sessions: OrderedDict[str, Session] = OrderedDict()
        self.in_use: dict[str, int] = {}  # id -> requests holding it (``using``)
        self.ended: OrderedDict[str, str] = OrderedDict()  # id -> why it ended (410)
        self.num_unloaded = 0
        # The conversations last seen, so a resent one is fingerprinted only past what was seen.
        self.seen = SeenConversations()
        self._retention_pass = float("-inf")  # when stored sessions were last checked
        self._idle_pass = float("-inf")  # when sessions were last checked for idleness
        self.config(None)  # fail at start, not at the first session, if the defaults are bad

    async def start(self) -> "SessionManager":
        """Open what this process owns: a storage not shared has every stored session opened
        (so its conversation index finds the implicit ones). Returns the manager."""
        if self.storage.durable and not self.storage.shared:
            for id in await self.storage.stored_ids():
                self.sessions[id] = await self.storage.load(id, self.counter)
                self.index(self.sessions[id])
        await self.sweep_stored()
        return self

    @property
    def store_bytes(self) -> int:
        return self.storage.stored_bytes

    async def stored(self, id) -> bool:
        """Whether the storage holds the session ``id`` (only an id of ARC's form is looked for)."""
        return await self.storage.exists(id)

    async def known(self, id) -> bool:
        """Whether ``id`` is a session here: in memory, or stored."""
        return isinstance(id, str) and (id in self.sessions or await self.storage.exists(id))

    def config(self, overrides: dict | None) -> ArcConfig:
        overrides = dict(overrides or {})
        unknown = set(overrides) - BUDGET_FIELDS
        if unknown:
            raise SessionError(f"budgets: unknown field(s) {', '.join(sorted(unknown))}; known: "
                               f"{', '.join(sorted(BUDGET_FIELDS))}")
        values = {**self.defaults, **overrides}
        max_tokens = values.pop("max_tokens", DEFAULT_MAX_TOKENS)
        window = values.pop("context_window", self.context_window)
        if not isinstance(window, int) or isinstance(window, bool) or not 0 < window <= self.context_window:
            raise SessionError(f"budgets: context_window={window!r} must be an integer in "
                               f"1..{self.context_window} (the served model's max_model_len)")
        try:
            return ArcConfig.for_window(window, max_tokens, **values)
        except (TypeError, ValueError) as error:
            raise SessionError(f"budgets: {error}") from None

    async def create(self, overrides: dict | None = None, caller: str | None = None,
                     client_id: str | None = None, who=None) -> Session:
        config = self.config(overrides)
        id = "sess_" + secrets.token_hex(12)
        session = await self.storage.new(id, lambda storage: Session(
            id, config, self.counter, storage, caller=caller, client_id=client_id,
            tenant=who.tenant if who else None, user=who.user if who else None))
        self.sessions[id] = session
        self.touch(session)
        self.sweep()
        await self.sweep_stored()
        return session

    # ---- implicit sessions (conversation_index.py) --------------------------------------

    async def for_conversation(self, messages: list[dict], caller: str, client_id: str | None = None,
                               who=None, prints: list[str] | None = None) -> Routed:
        """The implicit session ``messages`` continue, or a new one, for one request that holds
        it (``Routed``: pass it to ``remember`` when the request ends). With the client's own
        conversation id, in that id's scope, where a rewritten history continues its session
        too. Finding and creating are one step per conversation (in the storage's index for it:
        under its lock where the storage is shared). ``prints``: the messages' fingerprints,
        where the request has them (else computed)."""
        scope = client_scope(caller, client_id)
        prints = self.seen.prints(messages, caller) if prints is None else prints
        keys = self.seen.keys(scope, prints)
        until = time.time() + HELD_S if self.storage.shared else float("inf")
        async with self.storage.conversations(scope, prints, until) as index:
            id = None
            for find in (index.find, index.find_rewritten if client_id else None):
                id = find(scope, prints, keys) if find else None
                if id is not None and await self.known(id):
                    break
                if id is not None:  # ended meanwhile: the conversation starts a new session
                    index.forget(id)
                    id = None
            if id is None:
                id = (await self.create(caller=scope, client_id=client_id, who=who)).id
            return Routed(id, scope, prints, index.hold(id, scope, prints, until, keys), keys)

    async def remember(self, session: Session | None, routed: Routed | None = None) -> None:
        """After a request: an implicit session is found by its conversation as it is now, and
        then the request's hold on the conversation it was routed by ends (``session`` None:
        only that, for a request that never had its session)."""
        remembers = session is not None and session.caller is not None and bool(session.fingerprints)
        releases = routed is not None and routed.held is not None
        # Both in one index where the conversation still starts as it was routed (one trip to a
        # shared index, not two); a rewritten start is another index.
        together = remembers and releases and (session.caller, session.fingerprints[:1]) == (routed.scope, routed.prints[:1])
        if remembers:
            async with self.storage.conversations(session.caller, session.fingerprints) as index:
                index.remember(session.id, session.caller, session.fingerprints,
                               self.seen.keys(session.caller, session.fingerprints))
                if together:
                    index.release(routed.held)
        if releases and not together:
            async with self.storage.conversations(routed.scope, routed.prints) as index:
                index.release(routed.held)

    def index(self, session: Session) -> None:
        """An implicit session found by its conversation (a storage's own index, at start)."""
        if session.caller is not None:
            self.storage.index.remember(session.id, session.caller, session.fingerprints,
                                        self.seen.keys(session.caller, session.fingerprints))

    # ---- sessions end -------------------------------------------------------------------

    def touch(self, session: Session) -> None:
        session.last_used = time.time()
        self.sessions.move_to_end(session.id)

    async def listing(self, who=None) -> list[dict]:
        """The sessions ``who`` may read (None: every one): in memory, and (with a durable
        storage) unloaded ones, most recent first. Where the storage is shared, a session is
        listed as stored: another process may have served it since this one kept its copy
        (each request's changes are stored before its answer), so a copy here is listed only
        while a request is making it."""
        mine = [session for session in self.sessions.values()
                if who is None or allows(session.tenant, session.user, who, write=False)]
        if self.storage.shared:
            rows = [dict(summary, in_memory=summary.get("id") in self.sessions)
                    for summary in await self.storage.listing(set(), who)]
            listed = {row.get("id") for row in rows}
            rows += [dict(session.summary(), in_memory=True) for session in mine
                     if session.id not in listed and self.in_use.get(session.id)]
        else:
            rows = [dict(session.summary(), in_memory=True) for session in mine]
            rows += [dict(summary, in_memory=False) for summary in await self.storage.listing(set(self.sessions), who)]
        return sorted(rows, key=lambda row: row.get("last_used", 0), reverse=True)

    def ttl_of(self, session: Session) -> float | None:
        if self.ttl_s is not None:
            return self.ttl_s
        return self.implicit_ttl_s if session.caller is not None else None

    def busy(self, id: str) -> bool:
        session = self.sessions.get(id)
        return bool(self.in_use.get(id)) or (session is not None and session.lock.locked())

    def sweep(self, now: float | None = None) -> None:
        """End the least recently used sessions beyond the cap, and (checked at most once a
        second) those idle past their TTL (``now``: wall-clock time). Never one serving a
        request. (What is stored is swept by ``sweep_stored``.)"""
        now = time.time() if now is None else now
        if self.max_sessions is not None:
            for id in list(self.sessions):
                if len(self.sessions) <= self.max_sessions:
                    break
                if not self.busy(id):
                    self.end(id, "capacity", f"the least recently used beyond --arc-max-sessions "
                                             f"{self.max_sessions}")
        if now - self._idle_pass < 1.0:
            return
        self._idle_pass = now
        for id, session in list(self.sessions.items()):
            ttl = self.ttl_of(session)
            if ttl is not None and now - session.last_used > ttl and not self.busy(id):
                self.end(id, "ttl", f"idle for more than {ttl:g} s (--arc-session-ttl)")

    async def sweep_stored(self, now: float | None = None) -> None:
        """With ``store_retention_s``: at most every quarter of it (and a minute), the stored
        sessions unused that long removed (``expire_stored``)."""
        now = time.time() if now is None else now
        if self.store_retention_s is not None and now - self._retention_pass >= min(60.0, self.store_retention_s / 4):
            self._retention_pass = now
            await self.expire_stored()

    async def expire_stored(self) -> None:
        """Remove the stored sessions unused for ``store_retention_s`` from the storage, none
        serving a request."""
        why = f"unused for more than {self.store_retention_s:g} s and removed from the store (--arc-store-retention)"
        for id in await self.storage.expire(self.store_retention_s, self.busy):
            if id in self.sessions:
                self.sessions.pop(id).close()
            self.storage.forget(id)
            self.remember_ended(id, why)
            metrics.UNLOADED.labels(reason="retention").inc()
            logger.info("ARC session %s removed from the store (%s)", id, why)

    def remember_ended(self, id: str, why: str) -> None:
        self.ended[id] = why
        while len(self.ended) > MAX_ENDED:
            self.ended.popitem(last=False)

    def end(self, id: str, reason: str, why: str) -> None:
        """Take a session out of memory: unloaded (a durable storage keeps it) or gone (410)."""
        session = self.sessions.pop(id, None)
        if session is None:
            return
        metrics.UNLOADED.labels(reason=reason).inc()
        session.close()
        if self.storage.durable:
            self.num_unloaded += 1
            logger.info("ARC session %s unloaded (%s); its storage keeps it", id, why)
            return
        self.storage.forget(id)
        self.remember_ended(id, why)
        logger.info("ARC session %s ended (%s)", id, why)

    def check(self, session: Session, who, write: bool) -> None:
        """Another caller's session answers as an unknown one (404: no oracle of existence)."""
        if who is not None and not allows(session.tenant, session.user, who, write):
            self.unknown(session.id)

    @contextlib.asynccontextmanager
    async def using(self, id: str, who=None, write: bool = False):
        """The session, for one request, if ``who`` may continue (``write``) or read it (None:
        ARC's own use): held by the storage for the request (one process at a time where it is
        shared, reloaded where another changed it), counted as in use until it ends, and what
        the request changed committed to the storage before it is let go. A request that
        continues it (``write``) holds its lock too, for its whole length, streamed or not:
        one such request of a session at a time (reads do not wait)."""
        if not await self.known(id):
            await self.missing(id)
        self.in_use[id] = self.in_use.get(id, 0) + 1
        try:
            async with self.storage.held(id, self.sessions.get(id), self.counter) as session:
                if session is None:
                    await self.missing(id)
                if self.sessions.get(id) is not session:
                    if id not in self.sessions and not self.storage.shared:
                        self.num_unloaded = max(0, self.num_unloaded - 1)
                    self.sessions[id] = session
                self.check(session, who, write)
                self.touch(session)
                self.sweep()
                async with session.lock if write else contextlib.nullcontext():
                    try:
                        yield session
                    finally:
                        # Still held: the storage takes the request's changes from its holder only.
                        # Shielded: a client gone mid-request (its stream's task cancelled) still
                        # leaves what the request archived stored.
                        with anyio.CancelScope(shield=True):
                            await self.commit(session)
            await self.sweep_stored()
        finally:
            count = self.in_use.get(id, 0) - 1
            if count > 0:
                self.in_use[id] = count
            else:
                self.in_use.pop(id, None)

    async def commit(self, session: Session) -> None:
        """What the request changed, to the storage (if the step did not commit it already).
        Where that fails (``StoreUnavailable``) the storage takes this process's copy for stale,
        so the next request starts from what is stored."""
        await session.commit()

    async def missing(self, id) -> None:
        """Raise for a session that is not here: 410 if it ended (here, or for its storage),
        else 404."""
        why = await self.storage.ended(id) if isinstance(id, str) and id not in self.ended else None
        if why is not None:
            self.remember_ended(id, why)
        self.unknown(id)

    def unknown(self, id) -> None:
        """Raise for a session that is not here: 410 if it ended, else 404 (the id shown
        shortened: it is whatever the request said)."""
        if isinstance(id, str) and id in self.ended:
            raise SessionError(f"ARC session {id!r} has ended ({self.ended[id]}) and was not "
                               "kept; start a new one", 410)
        shown = id if isinstance(id, str) and len(id) <= 64 else f"{str(id)[:40]}... ({len(str(id))} characters)"
        raise SessionError(f"no ARC session {shown!r}; create one with POST /v1/arc/sessions", 404)

    async def get(self, id: str) -> Session:
        """A session of this process (a storage not shared; shared ones go through ``using``),
        loaded from its storage if it was unloaded."""
        session = self.sessions.get(id) if isinstance(id, str) else None
        if session is None and not self.storage.shared and await self.stored(id):
            session = self.sessions[id] = await self.storage.load(id, self.counter)
            self.num_unloaded = max(0, self.num_unloaded - 1)
        if session is None:
            await self.missing(id)
        self.touch(session)
        self.sweep()
        return session

    async def delete(self, id: str) -> None:
        """The session gone from memory and its storage (the caller holds it: ``using``)."""
        session = self.sessions.pop(id, None)
        if session is None and not await self.stored(id):
            await self.missing(id)
        self.storage.forget(id)
        if session is not None:
            session.close()
        await self.storage.delete(id)

    async def close(self) -> None:
        for session in self.sessions.values():
            session.close()
        await self.storage.close()


if __name__ == "__main__":
    from arc_vllm.offline import go_offline

    go_offline()  # a process starts here: tiktoken's files from this project's cache
    from arc_vllm.core.tokens import TiktokenCounter

    async def example():
        manager = SessionManager(TiktokenCounter(), 8192, {}, ttl_s=60)
        session = await manager.create()
        manager.sweep(now=time.time() + 61)
        try:
            await manager.get(session.id)
        except SessionError as error:
            print(error.status, error)

    asyncio.run(example())
