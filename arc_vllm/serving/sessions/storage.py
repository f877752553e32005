"""Where sessions live beyond one process's memory: one interface, one implementation per place.

    MemoryStorage    host memory only (the default): a session out of memory has ended (410)
    FolderStorage    a folder (``--arc-store DIR``, ``sessions/folder.py``): durable, a folder
                     per session; with ``shared``, several processes on one machine serve them
    RedisStorage     Redis or Valkey (``--arc-store redis://...``, ``sessions/redis_store.py``):
                     durable and shared, any replica on any node serves any session

The manager (``sessions/manager.py``) keeps sessions in memory, ends them, and asks its storage
for the rest, never which one it is. Every method that may reach beyond the process is a
coroutine, so a store across the network never stalls the server's event loop. The contract of
each method, as every implementation keeps it:

    open_store(session)        the session's ObsStore: the observation log itself (exact, in
                               order); durable where ``durable``, every acknowledged append kept
    new(id, make)              a new session: its place made, ``make(storage)`` builds it, kept
    commit(session)            what changed since the last commit (its new observations, its
                               state after a request, ``Session.state``): all of it or nothing
                               (``StoreUnavailable``, and then this process's copy is dropped, so
                               the next request starts from what is stored). Where ``shared``,
                               refused unless this process still holds the session (``held``)
    load(id, counter)          the stored session ``id`` (None: not stored), its store reopened
                               and its context rebuilt exactly; only an id of ARC's form
                               (``SESSION_ID``) is ever looked for
    exists(id)                 whether it holds the session ``id``
    ended(id)                  why a session it held was removed (retention), else None
    stored_ids()               every stored session's id
    delete(id)                 the session and its store, gone
    listing(skip, who)         summaries of stored sessions not in ``skip`` that ``who`` may read
    held(id, cached, counter)  async context: the session for one request. Where ``shared``,
                               held by one process at a time (waiting up to the lock timeout, then
                               ``SessionBusy``), and reloaded where another process changed it
                               since ``cached``; else ``cached`` or a load
    conversations(scope, prints)  async context: the conversation index holding the
                               conversations of ``scope`` that start as ``prints`` (find and
                               create in one step: where ``shared``, under its lock, written
                               back after); ``forget(id)``: an id no index should find again
    expire(retention_s, busy)  the stored sessions unused that long (not ``busy``) removed; their
                               ids; ``stored_bytes``: the stored size taken meanwhile
    secret()                   the compaction handles' secret every process over it shares
    export(id)                 a durable storage's session as (its whole state, its log's frames),
                               untouched; ``import_state(id, state, frames)`` stores one so (refused
                               where one is stored under its id): ``arc-vllm store copy``
    close()                    connections and files let go

Blocking: no method blocks the event loop. File work (``FolderStorage``) runs in a worker
thread (``asyncio.to_thread``); network work (Redis) is awaited; a wait for a lock or lease is
``poll`` on the loop (never a thread: threads all waiting for a lock whose holder needs one of
them would wait until the timeout). Atomicity: a commit is whole or absent (a file is replaced
by ``atomic_write``, Redis by one script); an observation acknowledged is kept. Leases: where
``shared``, a session is held by one process per request, up to ``lock_timeout_s`` of waiting
(then ``SessionBusy``, a 409); a hold lost meanwhile makes the commit fail (``LeaseLost``).
Errors: a store that does not answer is ``StoreUnavailable`` (503), and nothing was stored.

Every storage names itself (``name``: in a 503, a log line, the metrics' label). What a
request spent on its storage is kept in ``spent`` (a context variable the route sets per
request: seconds and round trips), so the ``arc`` object can say it (``store_ms``).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from dataclasses import dataclass
import os
import re
import secrets
import time
from pathlib import Path

from arc_vllm.core.store import ObsStore
from arc_vllm.serving.sessions.conversation_index import ConversationIndex

SESSION_ID = re.compile(r"sess_[0-9a-f]{24}")  # what the manager gives; nothing else is looked up
# Every storage's limits, written once.
INDEX_PER_START = 256  # sessions one conversation start's shared index holds, the most recently remembered
MAX_ENDED = 65536      # ended or removed session ids remembered (a 410, not a 404), the most recent
POLL_S = (0.01, 0.1)   # a wait for a lock or lease tries again after this long, growing to the second


async def poll(attempt, timeout_s: float, busy):
    """``await attempt()`` until it gives something other than None, and that; past
    ``timeout_s``, raise ``busy()``. Waits on the event loop, backing off within ``POLL_S``."""
    deadline, pause = time.monotonic() + timeout_s, POLL_S[0]
    while True:
        value = await attempt()
        if value is not None:
            return value
        if time.monotonic() >= deadline:
            raise busy()
        await asyncio.sleep(pause)
        pause = min(POLL_S[1], pause * 2)


def atomic_write(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` so that a reader sees the old file or the new, whole: a
    new file written beside it, then renamed over it (blocking: call it off the event loop)."""
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(text)
    os.replace(temporary, path)


@dataclass
class Spent:
    """What one request spent on its session storage."""

    seconds: float = 0.0
    round_trips: int = 0


# This request's storage spending (None: not counted); the route sets a new one per request.
spent: contextvars.ContextVar[Spent | None] = contextvars.ContextVar("arc_store_spent", default=None)


def account(seconds: float, trips: int = 1) -> None:
    """Count a storage operation toward the request it serves."""
    counted = spent.get()
    if counted is not None:
        counted.seconds += seconds
        counted.round_trips += trips


def spent_figures() -> dict:
    """This request's storage figures for its ``arc`` object (none where nothing was counted)."""
    counted = spent.get()
    if not counted or not counted.round_trips:
        return {}
    return {"store_ms": round(counted.seconds * 1000, 2), "store_round_trips": counted.round_trips}


def is_session_id(id) -> bool:
    return isinstance(id, str) and SESSION_ID.fullmatch(id) is not None


class SessionStorage:
    """The interface (the module docstring states each method's contract). The conversation
    index of a storage that is not shared is this process's own (``index``)."""

    name = "host memory"
    durable = False  # a session out of memory comes back from it
    shared = False   # several processes serve its sessions
    stored_bytes = 0  # what it holds, taken at the last ``expire``

    def __init__(self):
        self.index = ConversationIndex()

    def open_store(self, session) -> ObsStore:
        raise NotImplementedError

    async def new(self, id: str, make):
        raise NotImplementedError

    async def commit(self, session) -> None:
        raise NotImplementedError

    async def load(self, id, counter):
        raise NotImplementedError

    async def exists(self, id) -> bool:
        raise NotImplementedError

    async def ended(self, id) -> str | None:
        return None

    async def stored_ids(self) -> list[str]:
        raise NotImplementedError

    async def delete(self, id: str) -> None:
        raise NotImplementedError

    async def listing(self, skip, who) -> list[dict]:
        raise NotImplementedError

    def held(self, id: str, cached, counter):
        raise NotImplementedError

    @contextlib.asynccontextmanager
    async def conversations(self, scope: str, prints: list[str], until: float = float("inf")):
        yield self.index

    def forget(self, id: str) -> None:
        self.index.forget(id)

    async def expire(self, retention_s: float, busy) -> list[str]:
        raise NotImplementedError

    async def secret(self) -> bytes:
        raise NotImplementedError

    async def export(self, id: str):
        raise ValueError(f"{self.name} keeps no session to copy")

    async def import_state(self, id: str, state: dict, frames: list[bytes]) -> None:
        raise ValueError(f"{self.name} keeps no session: copy to a folder or Redis")

    async def close(self) -> None:
        pass


class MemoryStorage(SessionStorage):
    """Host memory: a session's store in memory, nothing beyond it (out of memory, it has ended)."""

    def __init__(self):
        super().__init__()
        self._secret = secrets.token_bytes(32)  # a process keeps no session past its life either

    def open_store(self, session) -> ObsStore:
        return ObsStore(head_preview_chars=session.config.head_preview_chars,
                        tail_preview_chars=session.config.tail_preview_chars)

    async def new(self, id: str, make):
        return make(self)

    async def commit(self, session) -> None:
        pass

    async def load(self, id, counter):
        return None

    async def exists(self, id) -> bool:
        return False

    async def stored_ids(self) -> list[str]:
        return []

    async def delete(self, id: str) -> None:
        pass

    async def listing(self, skip, who) -> list[dict]:
        return []

    @contextlib.asynccontextmanager
    async def held(self, id: str, cached, counter):
        yield cached

    async def expire(self, retention_s: float, busy) -> list[str]:
        return []

    async def secret(self) -> bytes:
        return self._secret
