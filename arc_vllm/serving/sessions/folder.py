"""Sessions in a folder (``--arc-store DIR``, alias ``--arc-store-dir``): the storage
``sessions/storage.py`` describes.

    DIR/<id>/store.arc       the session's ObsStore, durable (fsync on every append)
    DIR/<id>/session.json    its state (``Session.state``), replaced atomically after each request
    DIR/<id>/session.lock    with ``shared``: held by the process serving a request of it
    DIR/.conversations/      with ``shared``: the conversation index, a file per conversation
                             start (``<key>.json``, its ``.lock`` beside it)
    DIR/.arc-secret          the compaction handles' secret (mode 0600), made by the first process

A process that owns the folder (not ``shared``) opens every stored session at start, so
sessions survive a restart (kill -9 included) with every acknowledged observation. With
``shared`` (several API servers or replicas over one folder) a request holds its session's
file lock for its whole length and reloads the session where another process wrote it since
(``held``); finding and creating an implicit session is one step under the lock of its
conversation start's index file. The OS drops a lock whose holder died.

Run ``python -m arc_vllm.serving.sessions.folder DIR`` to list the sessions a folder holds.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import secrets
import shutil
import time
from pathlib import Path

from arc_vllm.core.store import ObsStore
from arc_vllm.core.store_log import FileLog, NewEvent, event_frame, frame_event
from arc_vllm.serving.errors import SessionBusy
from arc_vllm.serving.sessions import locks
from arc_vllm.serving.sessions.conversation_index import ConversationIndex, chain
from arc_vllm.serving.sessions.conversation_keys import is_text
from arc_vllm.serving.sessions.ownership import allows
from arc_vllm.serving.sessions.session import Session
from arc_vllm.serving.sessions.storage import INDEX_PER_START, SESSION_ID, SessionStorage, account, atomic_write

logger = logging.getLogger(__name__)

INDEX_FOLDER = ".conversations"
SECRET_FILE = ".arc-secret"


def file_stamp(path: Path) -> tuple:
    """Which file ``path`` is now: each save writes a new one (inode, time, size)."""
    status = os.stat(path)
    return status.st_ino, status.st_mtime_ns, status.st_size


def repaired_client_id(client_id, folder: Path):
    """A stored client id as text that can be written: one stored before ids were checked may
    hold a lone surrogate, which would break every listing; it is kept escaped, with a warning."""
    if isinstance(client_id, str) and not is_text(client_id):
        logger.warning("session %s: its client id is not valid text; kept escaped", folder.name)
        return client_id.encode("utf-8", "backslashreplace").decode("utf-8")
    return client_id


def read_index(path: Path) -> ConversationIndex:
    try:
        state = json.loads(path.read_text())
    except (OSError, ValueError):  # none yet (or unreadable: rebuilt from the next requests)
        state = {}
    index = ConversationIndex.from_state(state, time.time())
    index.max_sessions = INDEX_PER_START
    return index


def write_index(path: Path, index: ConversationIndex) -> None:
    atomic_write(path, json.dumps(index.state(time.time())))


class FolderStorage(SessionStorage):
    durable = True

    def __init__(self, folder, shared: bool = False, lock_timeout_s: float = 60.0):
        super().__init__()
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.name = f"folder {self.folder}"
        self.shared = shared
        self.lock_timeout_s = lock_timeout_s
        self.stamps: dict[str, tuple] = {}  # session.json as this process last wrote or read it
        self.listed: dict[str, tuple] = {}  # the listing index: id -> (file stamp, (tenant, user, summary))

    def place(self, id) -> Path | None:
        """The folder of the stored session ``id``: only an id of ARC's form is looked for (a
        5,000-character one, a path, is no session), and only a folder holding a session."""
        if not isinstance(id, str) or not SESSION_ID.fullmatch(id):
            return None
        folder = self.folder / id
        return folder if (folder / "session.json").exists() else None

    async def exists(self, id) -> bool:
        return self.place(id) is not None

    def open_store(self, session) -> ObsStore:
        return ObsStore.open(self.folder / session.id / "store.arc", fsync="always",
                             head_preview_chars=session.config.head_preview_chars,
                             tail_preview_chars=session.config.tail_preview_chars)

    async def new(self, id: str, make):
        (self.folder / id).mkdir()
        session = make(self)
        # Written before the first await: a concurrent request that finds this id (the
        # conversation index names it at once) must find it stored, never half-made. A new
        # session's state is small.
        self.write_state(id, session.state())
        if self.shared:  # held by no request yet: any process may take it
            session.store.release()
        return session

    async def commit(self, session) -> None:
        # The store file has every observation already (fsync on append): the state is left.
        started = time.perf_counter()
        await self.save(session)
        account(time.perf_counter() - started)

    async def save(self, session) -> None:
        """Replace session.json with the session's state (atomically), in a worker thread: the
        state is taken here, on the loop, while the request still holds the session."""
        state = session.state()
        await asyncio.to_thread(self.write_state, session.id, state)

    def write_state(self, id: str, state: dict) -> None:
        target = self.folder / id / "session.json"
        atomic_write(target, json.dumps(state))
        self.stamps[id] = file_stamp(target)

    async def load(self, id, counter):
        return await asyncio.to_thread(self.read, id, counter)

    def read(self, id, counter):
        folder = self.place(id)
        if folder is None:
            return None
        state = json.loads((folder / "session.json").read_text())
        state["client_id"] = repaired_client_id(state.get("client_id"), folder)
        session = Session.from_state(state, counter, self)
        self.stamps[id] = file_stamp(folder / "session.json")
        return session

    async def stored_ids(self) -> list[str]:
        return await asyncio.to_thread(self.ids)

    def ids(self) -> list[str]:
        return sorted(folder.name for folder in self.folder.iterdir() if self.place(folder.name))

    async def delete(self, id: str) -> None:
        await asyncio.to_thread(self.remove, id)

    def remove(self, id: str) -> None:
        self.stamps.pop(id, None)
        shutil.rmtree(self.folder / id, ignore_errors=True)

    async def listing(self, skip, who) -> list[dict]:
        rows = []
        for id, (tenant, user, summary) in (await asyncio.to_thread(self.summaries)).items():
            if id in skip or (who is not None and not allows(tenant, user, who, write=False)):
                continue
            rows.append(dict(summary))
        return rows

    def summaries(self) -> dict[str, tuple]:
        """Every stored session's (tenant, user, summary), from the listing index: a session's
        session.json is read again only where it changed since (its file stamp), so a listing
        reads what changed, not every session (blocking: called in a worker thread)."""
        index, kept = self.listed, {}
        for folder in self.folder.iterdir():
            if not self.place(folder.name):
                continue
            try:
                stamp = file_stamp(folder / "session.json")
                if folder.name in index and index[folder.name][0] == stamp:
                    kept[folder.name] = index[folder.name]
                    continue
                state = json.loads((folder / "session.json").read_text())
            except (OSError, ValueError):
                continue  # being replaced by another process: listed next time
            summary = dict(state.get("summary") or {"id": state.get("id", folder.name)})
            if "client_id" in summary:
                summary["client_id"] = repaired_client_id(summary["client_id"], folder)
            kept[folder.name] = (stamp, (state.get("tenant"), state.get("user"), summary))
        self.listed = kept
        return {id: entry for id, (_, entry) in kept.items()}

    @contextlib.asynccontextmanager
    async def held(self, id: str, cached, counter):
        if not self.shared:  # this process owns the folder: its copy is the session
            yield cached if cached is not None else await asyncio.to_thread(self.read, id, counter)
            return
        lock = await locks.take_async(self.folder / id / "session.lock", self.lock_timeout_s)
        try:
            session = await asyncio.to_thread(self.check_out, id, cached, counter)
            try:
                yield session
            finally:
                if session is not None:
                    session.store.release()
        finally:
            lock.release()

    def check_out(self, id: str, cached, counter):
        """Under the session's lock: ``cached`` if still current, else the folder's."""
        if cached is not None:
            unchanged = cached.store.reacquire(self.lock_timeout_s)
            if unchanged and self.stamps.get(id) == file_stamp(self.folder / id / "session.json"):
                return cached
            cached.close()
        return self.read(id, counter)

    def index_file(self, scope: str, prints: list[str]) -> Path:
        """The shared index file of the conversations of ``scope`` that start as ``prints``."""
        folder = self.folder / INDEX_FOLDER
        folder.mkdir(exist_ok=True)
        return folder / f"{chain(scope, prints[:1])[0]}.json"

    @contextlib.asynccontextmanager
    async def conversations(self, scope: str, prints: list[str], until: float = float("inf")):
        if not self.shared or not prints:
            yield self.index
            return
        path = self.index_file(scope, prints)
        lock = await locks.take_async(path.with_suffix(".lock"), self.lock_timeout_s)
        try:
            index = await asyncio.to_thread(read_index, path)
            yield index
            await asyncio.to_thread(write_index, path, index)
        finally:
            lock.release()

    def forget(self, id: str) -> None:
        # A shared index's entries for an id gone are dropped when next found (``manager.route``).
        self.index.forget(id)

    async def expire(self, retention_s: float, busy) -> list[str]:
        """Remove the stored sessions unused for ``retention_s`` (their last request wrote
        session.json), none serving a request (``busy(id)``; under its file lock when shared);
        take the folder's size; and, shared, drop index files unused as long. In a worker thread
        (``busy`` only reads the manager's counts)."""
        return await asyncio.to_thread(self.expire_now, retention_s, busy)

    def expire_now(self, retention_s: float, busy) -> list[str]:
        removed, total = [], 0
        for folder in list(self.folder.iterdir()):
            if not self.place(folder.name):
                continue
            id = folder.name
            try:
                unused = time.time() - (folder / "session.json").stat().st_mtime
            except OSError:  # removed meanwhile by another process
                continue
            if unused <= retention_s or busy(id):
                total += sum(path.stat().st_size for path in folder.iterdir() if path.is_file())
                continue
            try:
                lock = locks.take(folder / "session.lock", 0) if self.shared else None
            except SessionBusy:  # another process serves it now
                continue
            try:
                self.remove(id)
            finally:
                if lock is not None:
                    lock.release()
            removed.append(id)
        for path in (self.folder / INDEX_FOLDER).glob("*.json") if self.shared else ():
            try:
                if time.time() - path.stat().st_mtime > retention_s:
                    path.unlink()
            except OSError:  # replaced or removed by another process meanwhile
                pass
        self.stored_bytes = total
        return removed

    async def export(self, id: str):
        """The stored session as (its whole state, its log's frames), untouched (``store copy``;
        a session another process holds open is refused: ``StoreLockedError``)."""
        folder = self.place(id)
        if folder is None:
            return None
        log = FileLog(folder / "store.arc", fsync="never")
        try:
            frames = [event_frame(event) for event in log.events()]
        finally:
            log.close()
        return json.loads((folder / "session.json").read_text()), frames

    async def import_state(self, id: str, state: dict, frames: list[bytes]) -> None:
        """A session stored as ``export`` gave it (refused where one is stored under its id)."""
        if self.place(id) is not None or not SESSION_ID.fullmatch(id):
            raise ValueError(f"{self.name} already holds {id} (or it is not a session id)")
        (self.folder / id).mkdir(exist_ok=True)
        log = FileLog(self.folder / id / "store.arc", fsync="always")
        try:
            for index, frame in enumerate(frames):
                event = frame_event(frame, id, index)
                if isinstance(event, NewEvent):
                    log.append_new(event.step, event.returncode, event.full_id, event.id,
                                   event.signature.encode(), event.content.encode())
                else:
                    log.append_repeat(event.step, event.id)
        finally:
            log.close()
        atomic_write(self.folder / id / "session.json", json.dumps(state))

    async def secret(self) -> bytes:
        """The folder's kept secret: the first process over it writes it; the others read it."""
        path = self.folder / SECRET_FILE
        try:
            descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            pass
        else:
            with os.fdopen(descriptor, "w") as handle:
                handle.write(secrets.token_hex(32))
        return path.read_text().strip().encode("ascii")


if __name__ == "__main__":
    import sys

    storage = FolderStorage(sys.argv[1])
    for id in storage.ids():
        state = json.loads((storage.folder / id / "session.json").read_text())
        print(id, state["config"]["context_window"], (state.get("summary") or {}).get("requests"))
