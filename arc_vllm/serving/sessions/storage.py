"""Where sessions live beyond one process's memory: one interface, one implementation per place.

    MemoryStorage    host memory only (the default): a session out of memory has ended (410)
    FolderStorage    ``--arc-store-dir DIR`` (``sessions/folder.py``): durable, a folder per
                     session; with ``shared``, several processes serve its sessions

The manager (``sessions/manager.py``) keeps sessions in memory, ends them, and asks its storage
for the rest, never which one it is. The contract of each method, as every implementation
keeps it:

    open_store(session)        the session's ObsStore: the observation log itself (exact, in
                               order); durable where ``durable``, every acknowledged append kept
    new(id, make)              a new session: its place made, ``make(storage)`` builds it, saved
    save(session)              its state after a request (``Session.state``), replacing the last
    load(id, counter)          the stored session ``id`` (None: not stored), its store reopened
                               and its context rebuilt exactly; only an id of ARC's form
                               (``SESSION_ID``) is ever looked for
    exists(id)                 whether it holds the session ``id``
    stored_ids()               every stored session's id
    delete(id)                 the session and its store, gone
    listing(skip, who)         summaries of stored sessions not in ``skip`` that ``who`` may read
    held(id, cached)           async context: the session for one request. Where ``shared``,
                               held by one process at a time (waiting up to the lock timeout, then
                               ``SessionBusy``), and reloaded where another process changed it
                               since ``cached``; else ``cached`` or a load
    conversations(scope, prints)  async context: the conversation index holding the
                               conversations of ``scope`` that start as ``prints`` (find and
                               create in one step: where ``shared``, under its lock, written
                               back after); ``forget(id)``: an id no index should find again
    expire(retention_s, busy)  the stored sessions unused that long (not ``busy``) removed; their
                               ids; ``bytes``: the stored size taken meanwhile

A third place (Redis) is a third implementation of the same methods.
"""

from __future__ import annotations

import contextlib
import re

from arc_vllm.core.store import ObsStore
from arc_vllm.serving.sessions.conversation_index import ConversationIndex

SESSION_ID = re.compile(r"sess_[0-9a-f]{24}")  # what the manager gives; nothing else is looked up


class SessionStorage:
    """The interface (the module docstring states each method's contract). The conversation
    index of a storage that is not shared is this process's own (``index``)."""

    durable = False  # a session out of memory comes back from it
    shared = False   # several processes serve its sessions
    bytes = 0        # what it holds, taken at the last ``expire``

    def __init__(self):
        self.index = ConversationIndex()

    def open_store(self, session) -> ObsStore:
        raise NotImplementedError

    def new(self, id: str, make):
        raise NotImplementedError

    def save(self, session) -> None:
        raise NotImplementedError

    def load(self, id, counter):
        raise NotImplementedError

    def exists(self, id) -> bool:
        raise NotImplementedError

    def stored_ids(self) -> list[str]:
        raise NotImplementedError

    def delete(self, id: str) -> None:
        raise NotImplementedError

    def listing(self, skip, who) -> list[dict]:
        raise NotImplementedError

    def held(self, id: str, cached, counter):
        raise NotImplementedError

    @contextlib.asynccontextmanager
    async def conversations(self, scope: str, prints: list[str], until: float = float("inf")):
        yield self.index

    def forget(self, id: str) -> None:
        self.index.forget(id)

    def expire(self, retention_s: float, busy) -> list[str]:
        raise NotImplementedError


class MemoryStorage(SessionStorage):
    """Host memory: a session's store in memory, nothing beyond it (out of memory, it has ended)."""

    def open_store(self, session) -> ObsStore:
        return ObsStore(head_preview_chars=session.config.head_preview_chars,
                        tail_preview_chars=session.config.tail_preview_chars)

    def new(self, id: str, make):
        return make(self)

    def save(self, session) -> None:
        pass

    def load(self, id, counter):
        return None

    def exists(self, id) -> bool:
        return False

    def stored_ids(self) -> list[str]:
        return []

    def delete(self, id: str) -> None:
        pass

    def listing(self, skip, who) -> list[dict]:
        return []

    @contextlib.asynccontextmanager
    async def held(self, id: str, cached, counter):
        yield cached

    def expire(self, retention_s: float, busy) -> list[str]:
        return []
