"""All of a server's ARC sessions: created, found (by id, or by conversation), and ended.

``SessionManager`` owns the sessions of one API process (``serving/sessions.py`` is one
session). With ``shared`` (several processes over one ``--arc-store-dir``) each request takes
the session's file lock and reloads it if another process changed it (``using``).

Sessions end (``SessionManager``): one idle past its TTL (``ttl_s`` when given, for every
session; else ``implicit_ttl_s``, a day, for implicit sessions and none for explicit ones), or
the least recently used beyond ``max_sessions`` in memory, leaves memory. With a store folder it is only unloaded: the
next request reloads it exactly from its folder. Without one it is gone, and a request naming
it gets 410 (not 404: the client learns its session ended, and can start another). A session
serving a request is never ended under it. With ``store_retention_s``
(``--arc-store-retention``) a stored session unused that long is removed from the folder too,
and answers 410 naming the option; ``store_bytes`` is the folder's size, taken at each such
pass. A session id is checked against the form ARC gives (``sess_`` and 24 hex digits) before
any file is looked for: anything else is an unknown session (404), never a path.

Implicit sessions (a request that names none) are found by their conversation
(``serving/conversation_index.py``): the client's own id for it where it sends one, else the
fingerprints of its messages. A Responses API request continues the session of the response
its ``previous_response_id`` names (ARC's response ids name their session: ``apis/responses.py``).

Run ``python -m arc_vllm.serving.session_manager`` to see a session end and answer 410.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import secrets
import shutil
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

from arc_vllm.core.config import DEFAULT_MAX_TOKENS, ArcConfig
from arc_vllm.serving.conversation_index import ConversationIndex, chain, client_scope
from arc_vllm.serving.conversation_keys import is_text
from arc_vllm.serving import session_lock
from arc_vllm.serving.ownership import allows
from arc_vllm.serving.seen_conversations import SeenConversations
from arc_vllm.serving.sessions import BUDGET_FIELDS, Session, SessionError, file_stamp

logger = logging.getLogger(__name__)


def repaired_client_id(client_id, folder: Path):
    """A stored client id as text that can be written: one stored before ids were checked may
    hold a lone surrogate, which would break every listing; it is kept escaped, with a warning."""
    if isinstance(client_id, str) and not is_text(client_id):
        logger.warning("session %s: its client id is not valid text; kept escaped", folder.name)
        return client_id.encode("utf-8", "backslashreplace").decode("utf-8")
    return client_id
MAX_ENDED = 65536  # ended session ids remembered (for 410), most recent
INDEX_FOLDER = ".conversations"  # shared sessions' conversation index, a file per conversation start
HELD_S = 600.0  # a shared index's hold on a request's conversation lasts at most this long
SHARED_PER_START = 256  # sessions a shared index file holds, the most recently remembered


@dataclass(frozen=True)
class Routed:
    """An implicit request's session, and the index key it holds while in flight."""

    id: str
    scope: str
    prints: list[str]
    held: str | None
    keys: list[str] | None = None  # chain(scope, prints)


def read_index(path: Path) -> ConversationIndex:
    try:
        state = json.loads(path.read_text())
    except (OSError, ValueError):  # none yet (or unreadable: rebuilt from the next requests)
        state = {}
    index = ConversationIndex.from_state(state, time.time())
    index.max_sessions = SHARED_PER_START
    return index


def write_index(path: Path, index: ConversationIndex) -> None:
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(index.state(time.time())))
    os.replace(temporary, path)
SESSION_ID = re.compile(r"sess_[0-9a-f]{24}")  # what ``create`` gives; nothing else names a folder


class SessionManager:
    def __init__(self, counter, context_window: int, defaults: dict, store_dir: str | None = None,
                 shared: bool = False, lock_timeout_s: float = 60.0, ttl_s: float | None = None,
                 max_sessions: int | None = 1024, implicit_ttl_s: float = 86400.0,
                 store_retention_s: float | None = None):
        if ttl_s is not None and ttl_s <= 0:
            raise ValueError(f"--arc-session-ttl: must be > 0 seconds (got {ttl_s})")
        if store_retention_s is not None and (store_retention_s <= 0 or not store_dir):
            raise ValueError(f"--arc-store-retention: must be > 0 seconds, with --arc-store-dir "
                             f"(got {store_retention_s}, store {store_dir or 'none'})")
        self.store_retention_s = store_retention_s
        self._retention_pass = float("-inf")  # when stored sessions were last checked
        self.store_bytes = 0  # the store folder's size at the last such check
        self.implicit_ttl_s = implicit_ttl_s
        self._idle_pass = float("-inf")  # when sessions were last checked for idleness
        if max_sessions is not None and max_sessions < 1:
            raise ValueError(f"--arc-max-sessions: must be >= 1 (got {max_sessions})")
        self.ttl_s = ttl_s
        self.max_sessions = max_sessions
        # In memory, least recent first. Not a cachetools cache: a session serving a request is
        # never ended, and idle TTLs differ per session; ``sweep`` says both.
        self.last_used: OrderedDict[str, float] = OrderedDict()
        self.ended: OrderedDict[str, str] = OrderedDict()  # id -> why it ended (410)
        self.implicit = ConversationIndex()
        # The conversations last seen, so a resent one is fingerprinted only past what was seen.
        self.seen = SeenConversations()

        self.in_use: dict[str, int] = {}  # id -> requests holding it (``using``)
        self.num_unloaded = 0
        if shared and not store_dir:
            raise ValueError("shared sessions (several API servers or replicas) need a store "
                             "folder every process can reach: --arc-store-dir DIR")
        self.counter = counter
        self.context_window = context_window
        self.defaults = defaults
        self.store_dir = Path(store_dir) if store_dir else None
        self.shared = shared
        self.lock_timeout_s = lock_timeout_s
        self.sessions: dict[str, Session] = {}
        self.config(None)  # fail at start, not at the first session, if the defaults are bad
        if self.store_dir:
            self.store_dir.mkdir(parents=True, exist_ok=True)
            if not shared:  # this process owns every session: open them all now
                for folder in sorted(self.store_dir.iterdir()):
                    if self.stored(folder.name):
                        session = self.load(folder)
                        self.sessions[session.id] = session
                        self.index(session)
            self.sweep()

    def stored(self, id) -> Path | None:
        """The folder of the stored session ``id``: only an id of the form ARC gives is looked
        for on disk (a 5,000-character one, a path, is no session), and only a folder that
        holds a session."""
        if self.store_dir is None or not isinstance(id, str) or not SESSION_ID.fullmatch(id):
            return None
        folder = self.store_dir / id
        return folder if (folder / "session.json").exists() else None

    def load(self, folder: Path) -> Session:
        """A session as its folder holds it (its store read, its context rebuilt)."""
        state = json.loads((folder / "session.json").read_text())
        state["client_id"] = repaired_client_id(state.get("client_id"), folder)
        session = Session.from_state(state, self.counter, folder)
        session.stamp = file_stamp(folder / "session.json")
        return session

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

    def create(self, overrides: dict | None = None, caller: str | None = None,
               client_id: str | None = None, who=None) -> Session:
        config = self.config(overrides)
        id = "sess_" + secrets.token_hex(12)
        folder = None
        if self.store_dir:
            folder = self.store_dir / id
            folder.mkdir()
        session = Session(id, config, self.counter, folder, caller=caller, client_id=client_id,
                          tenant=who.tenant if who else None, user=who.user if who else None)
        session.save()
        if self.shared:
            session.store.release()
        self.sessions[id] = session
        self.touch(id)
        self.sweep()
        return session

    # ---- implicit sessions (conversation_index.py) --------------------------------------

    async def for_conversation(self, messages: list[dict], caller: str, client_id: str | None = None,
                               who=None, prints: list[str] | None = None) -> Routed:
        """The implicit session ``messages`` continue, or a new one, for one request that holds
        it (``Routed``: pass it to ``remember`` when the request ends). With the client's own
        conversation id, in that id's scope, where a rewritten history continues its session
        too (``conversation_index.py``). Finding and creating are one step per conversation:
        within this process (nothing is awaited between them), and with shared sessions
        across processes too, under the lock of the conversation start's index file.
        ``prints``: the messages' fingerprints, where the request has them (else computed)."""
        scope = client_scope(caller, client_id)
        prints = self.seen.prints(messages, caller) if prints is None else prints
        keys = self.seen.keys(scope, prints)
        if not self.shared or not prints:
            return self.route(self.implicit, scope, prints, keys, client_id, who)
        path = self.index_file(scope, prints)
        lock = await session_lock.take_async(path.with_suffix(".lock"), self.lock_timeout_s)
        try:
            index = read_index(path)
            routed = self.route(index, scope, prints, keys, client_id, who, until=time.time() + HELD_S)
            write_index(path, index)
        finally:
            lock.release()
        return routed

    def route(self, index: ConversationIndex, scope: str, prints: list[str], keys: list[str], client_id, who,
              until: float = float("inf")) -> Routed:
        id = None
        for find in (index.find, index.find_rewritten if client_id else None):
            id = find(scope, prints, keys) if find else None
            if id is not None and (id in self.sessions or self.stored(id)):
                break
            if id is not None:  # ended meanwhile: the conversation starts a new session
                index.forget(id)
                id = None
        if id is None:
            id = self.create(caller=scope, client_id=client_id, who=who).id
        return Routed(id, scope, prints, index.hold(id, scope, prints, until, keys), keys)

    def index_file(self, scope: str, prints: list[str]) -> Path:
        """The shared index file of the conversations of ``scope`` that start as ``prints``."""
        folder = self.store_dir / INDEX_FOLDER
        folder.mkdir(exist_ok=True)
        return folder / f"{chain(scope, prints[:1])[0]}.json"

    async def remember(self, session: Session | None, routed: Routed | None = None) -> None:
        """After a request: an implicit session is found by its conversation as it is now, and
        the request's hold on the conversation it was routed by ends (``session`` None: only
        that, for a request that never had its session)."""
        if (session is None or session.caller is None) and routed is None:
            return
        if not self.shared:
            if session is not None:
                self.index(session)
            if routed is not None:
                self.implicit.release(routed.held)
            return
        await self.remember_shared(session, routed)

    def index(self, session: Session) -> None:
        if session.caller is not None:
            self.implicit.remember(session.id, session.caller, session.fingerprints,
                                   self.seen.keys(session.caller, session.fingerprints))

    async def remember_shared(self, session: Session | None, routed: Routed | None) -> None:
        updates = {}  # index file -> what changes in it
        if session is not None and session.caller is not None and session.fingerprints:
            updates[self.index_file(session.caller, session.fingerprints)] = [True, None]
        if routed is not None and routed.held is not None:
            updates.setdefault(self.index_file(routed.scope, routed.prints), [False, None])[1] = routed.held
        for path, (now_at, held) in updates.items():
            lock = await session_lock.take_async(path.with_suffix(".lock"), self.lock_timeout_s)
            try:
                index = read_index(path)
                if now_at:
                    index.remember(session.id, session.caller, session.fingerprints,
                                   self.seen.keys(session.caller, session.fingerprints))
                index.release(held)
                write_index(path, index)
            finally:
                lock.release()

    # ---- sessions end -------------------------------------------------------------------

    def touch(self, id: str) -> None:
        self.last_used[id] = time.monotonic()
        self.last_used.move_to_end(id)
        if id in self.sessions:
            self.sessions[id].last_used = time.time()

    def listing(self, who=None) -> list[dict]:
        """The sessions ``who`` may read (None: every one): in memory, and (with a store folder)
        unloaded ones, most recent first."""
        rows = [dict(session.summary(), in_memory=True) for session in self.sessions.values()
                if who is None or allows(session.tenant, session.user, who, write=False)]
        if self.store_dir:
            for folder in self.store_dir.iterdir():
                if folder.name not in self.sessions and self.stored(folder.name):
                    try:
                        state = json.loads((folder / "session.json").read_text())
                    except (OSError, ValueError):
                        continue  # being replaced by another process: listed next time
                    if who is not None and not allows(state.get("tenant"), state.get("user"), who, write=False):
                        continue
                    summary = dict(state.get("summary") or {"id": state.get("id", folder.name)})
                    if "client_id" in summary:
                        summary["client_id"] = repaired_client_id(summary["client_id"], folder)
                    rows.append(dict(summary, in_memory=False))
        return sorted(rows, key=lambda row: row.get("last_used", 0), reverse=True)

    def ttl_of(self, session: Session | None) -> float | None:
        if self.ttl_s is not None:
            return self.ttl_s
        return self.implicit_ttl_s if session is not None and session.caller is not None else None

    def busy(self, id: str) -> bool:
        session = self.sessions.get(id)
        return bool(self.in_use.get(id)) or (session is not None and session.lock.locked())

    def sweep(self, now: float | None = None) -> None:
        """End the least recently used sessions beyond the cap, and (checked at most once a
        second) those idle past their TTL. Never one serving a request."""
        now = time.monotonic() if now is None else now
        if self.max_sessions is not None:
            for id in list(self.last_used):
                if len(self.sessions) <= self.max_sessions:
                    break
                if not self.busy(id):
                    self.end(id, "capacity", f"the least recently used beyond --arc-max-sessions "
                                             f"{self.max_sessions}")
        if self.store_retention_s is not None and now - self._retention_pass >= min(60.0, self.store_retention_s / 4):
            self._retention_pass = now
            self.expire_stored()
        if now - self._idle_pass < 1.0:
            return
        self._idle_pass = now
        for id, used in list(self.last_used.items()):
            ttl = self.ttl_of(self.sessions.get(id))
            if ttl is not None and now - used > ttl and not self.busy(id):
                self.end(id, "ttl", f"idle for more than {ttl:g} s (--arc-session-ttl)")

    def expire_stored(self) -> None:
        """Remove the stored sessions unused for ``store_retention_s`` (their last request
        wrote session.json) from the folder, none serving a request (under its file lock when
        shared); and take the folder's size."""
        from arc_vllm.serving import metrics

        why = f"unused for more than {self.store_retention_s:g} s and removed from the store (--arc-store-retention)"
        total = 0
        for folder in list(self.store_dir.iterdir()):
            if not self.stored(folder.name):
                continue
            id = folder.name
            try:
                unused = time.time() - (folder / "session.json").stat().st_mtime
            except OSError:  # removed meanwhile by another process
                continue
            if unused <= self.store_retention_s or self.busy(id):
                total += sum(path.stat().st_size for path in folder.iterdir() if path.is_file())
                continue
            try:
                lock = session_lock.take(folder / "session.lock", 0) if self.shared else None
            except session_lock.SessionBusy:  # another process serves it now
                continue
            try:
                if id in self.sessions:
                    self.sessions.pop(id).close()
                    self.last_used.pop(id, None)
                shutil.rmtree(folder, ignore_errors=True)
            finally:
                if lock is not None:
                    lock.release()
            self.implicit.forget(id)
            self.remember_ended(id, why)
            metrics.UNLOADED.labels(reason="retention").inc()
            logger.info("ARC session %s removed from the store (%s)", id, why)
        # A shared index file unused as long names only sessions gone or found by id alone.
        for path in (self.store_dir / INDEX_FOLDER).glob("*.json") if self.shared else ():
            try:
                if time.time() - path.stat().st_mtime > self.store_retention_s:
                    path.unlink()
            except OSError:  # replaced or removed by another process meanwhile
                pass
        self.store_bytes = total

    def remember_ended(self, id: str, why: str) -> None:
        self.ended[id] = why
        while len(self.ended) > MAX_ENDED:
            self.ended.popitem(last=False)

    def end(self, id: str, reason: str, why: str) -> None:
        """Take a session out of memory: unloaded (a store folder keeps it) or gone (410)."""
        from arc_vllm.serving import metrics

        self.last_used.pop(id, None)
        session = self.sessions.pop(id, None)
        if session is None:
            return
        metrics.UNLOADED.labels(reason=reason).inc()
        session.close()
        if session.folder is not None:
            self.num_unloaded += 1
            logger.info("ARC session %s unloaded (%s); its folder keeps it", id, why)
            return
        self.implicit.forget(id)
        self.remember_ended(id, why)
        logger.info("ARC session %s ended (%s)", id, why)

    def check(self, session: Session, who, write: bool) -> None:
        """Another caller's session answers as an unknown one (404: no oracle of existence)."""
        if who is not None and not allows(session.tenant, session.user, who, write):
            self.unknown(session.id)

    @contextlib.asynccontextmanager
    async def using(self, id: str, who=None, write: bool = False):
        """The session, for one request, if ``who`` may continue (``write``) or read it (None:
        ARC's own use). Shared sessions (``shared=True``) are held by one
        process at a time: this takes the session's file lock (waiting for another process
        to finish its request), reloads the session if another process changed it since this
        one last had it, and on leaving releases the store and the lock."""
        if not self.shared:
            session = self.get(id)
            self.check(session, who, write)
            self.in_use[id] = self.in_use.get(id, 0) + 1
            try:
                yield session
            finally:
                self.release(id)
            return
        folder = self.folder_of(id)
        self.in_use[id] = self.in_use.get(id, 0) + 1
        try:
            lock = await session_lock.take_async(folder / "session.lock", self.lock_timeout_s)
            try:
                session = await asyncio.to_thread(self.check_out, id, folder)
                try:
                    self.check(session, who, write)
                    self.touch(id)
                    self.sweep()
                    yield session
                finally:
                    session.store.release()
            finally:
                lock.release()
        finally:
            self.release(id)

    def release(self, id: str) -> None:
        count = self.in_use.get(id, 0) - 1
        if count > 0:
            self.in_use[id] = count
        else:
            self.in_use.pop(id, None)

    def folder_of(self, id: str) -> Path:
        folder = self.stored(id)
        if folder is None:
            self.unknown(id)
        return folder

    def unknown(self, id) -> None:
        """Raise for a session that is not here: 410 if it ended, else 404 (the id shown
        shortened: it is whatever the request said)."""
        if isinstance(id, str) and id in self.ended:
            raise SessionError(f"ARC session {id!r} has ended ({self.ended[id]}) and was not "
                               "kept; start a new one", 410)
        shown = id if isinstance(id, str) and len(id) <= 64 else f"{str(id)[:40]}... ({len(str(id))} characters)"
        raise SessionError(f"no ARC session {shown!r}; create one with POST /v1/arc/sessions", 404)

    def check_out(self, id: str, folder: Path) -> Session:
        """Under the session's lock: this process's copy if still current, else the folder's."""
        cached = self.sessions.get(id)
        if cached is not None:
            unchanged = cached.store.reacquire(self.lock_timeout_s)
            if unchanged and cached.stamp == file_stamp(folder / "session.json"):
                return cached
            cached.close()
        session = self.load(folder)
        self.sessions[id] = session
        return session

    def get(self, id: str) -> Session:
        """A session owned by this process (not shared; shared ones go through ``using``),
        reloaded from its folder if it was unloaded."""
        session = self.sessions.get(id) if isinstance(id, str) else None
        if session is None and not self.shared and (folder := self.stored(id)):
            session = self.sessions[id] = self.load(folder)
            self.num_unloaded = max(0, self.num_unloaded - 1)
        if session is None:
            self.unknown(id)
        self.touch(id)
        self.sweep()
        return session

    def delete(self, id: str) -> None:
        session = self.get(id)
        del self.sessions[id]
        self.last_used.pop(id, None)
        self.implicit.forget(id)
        session.close()
        if session.folder:
            shutil.rmtree(session.folder)

    def close(self) -> None:
        for session in self.sessions.values():
            session.close()


if __name__ == "__main__":
    from arc_vllm.offline import go_offline

    go_offline()  # a process starts here: tiktoken's files from this project's cache
    from arc_vllm.core.tokens import TiktokenCounter

    manager = SessionManager(TiktokenCounter(), 8192, {}, ttl_s=60)
    session = manager.create()
    manager.sweep(now=time.monotonic() + 61)
    try:
        manager.get(session.id)
    except SessionError as error:
        print(error.status, error)
