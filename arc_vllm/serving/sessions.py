"""Server-side ARC sessions: one ArcContext per session, in host memory or in a store folder.

A session owns taking a request's messages in (``take_in``: new messages found by their
fingerprints, the task prefix fixed at the first request, every new observation archived
before anything can hide it) and persisting itself (``save``).

With a store folder (``--arc-store-dir``) each session lives in ``DIR/<id>/``: ``store.arc``
(the durable ObsStore, fsync on every append) and ``session.json`` (task prefix, budgets,
the fingerprints of the messages taken in, the request count, the conversation's size
without ARC and the context's state: turns, compaction state, catalog, recalled set), replaced
atomically after each request. On start
every session found there is opened again, so sessions survive a restart (kill -9 included)
with every acknowledged observation. Ids are random; an id of one session never resolves in
another, because each session has its own store.

Run ``python -m arc_vllm.serving.sessions DIR`` to list the sessions kept in DIR.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import shutil
from dataclasses import fields
from pathlib import Path

from arc_vllm.core.config import ArcConfig
from arc_vllm.core.context import DEFAULT_SYSTEM, ArcContext
from arc_vllm.core.snapshot import restore, snapshot
from arc_vllm.core.store import ObsStore
from arc_vllm.core.transcript import content_text, take_in
from arc_vllm.serving.session_lock import FileLock

# A session may ask for a smaller window than the server's (a client sized for a smaller
# model, a benchmark at several windows on one server), never a larger one.
BUDGET_FIELDS = {f.name for f in fields(ArcConfig)}


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
                 context_state: dict | None = None):
        self.id = id
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
        self.num_requests = num_requests
        # session.json as this process last wrote or read it: a sharing process that finds
        # another file there (each save replaces it) reloads the session.
        self.stamp: tuple | None = None
        if prefix:
            self.start(prefix, tools, context_state)

    def start(self, prefix: list[dict], tools: list[dict] | None = None,
              context_state: dict | None = None) -> None:
        """Fix the task prefix F at the first request: the client's own prefix messages, with
        ARC's note on stubs and commands after the client's system prompt. A reopened session
        gets its context's state back (``core.snapshot``): the same view as before."""
        messages = [dict(message) for message in prefix] or [{"role": "user", "content": ""}]
        if messages[0]["role"] == "system":
            messages[0]["content"] = f"{messages[0]['content']}\n\n{DEFAULT_SYSTEM}".lstrip()
        else:
            messages.insert(0, {"role": "system", "content": DEFAULT_SYSTEM})
        if context_state is not None:
            self.context = restore(self.config, self.counter, self.store, messages, tools, context_state)
        else:
            self.context = ArcContext(self.config, self.counter, store=self.store, prefix=messages,
                                      tools=tools)
        self.prefix = prefix

    def take_in(self, messages: list[dict], tools: list[dict] | None) -> int:
        """Archive what is new in a request's ``messages``; ``tools`` are the tools the engine
        will render (the request's and ARC's). Returns the conversation's size without ARC.
        Raises ValueError (a bad message, or a task prefix that cannot fit) with nothing
        stored."""
        items = take_in(messages, self.fingerprints, self.context is not None)
        if self.context is None:
            self.start(items.prefix, tools)
        else:
            self.context.set_tools(tools)
        context = self.context
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
                            style=step.style, call=step.call, group=step.group)
        self.fingerprints = items.fingerprints
        self.num_requests += 1
        self.save()
        return context.prefix_tokens + self.full_tokens

    def save(self) -> None:
        if self.folder is None:
            return
        state = {"id": self.id, "config": self.config.to_dict(),
                 "prefix": self.prefix, "fingerprints": self.fingerprints,
                 "tools": self.context.tools if self.context else None,
                 "full_tokens": self.full_tokens, "num_requests": self.num_requests,
                 "context": snapshot(self.context) if self.context else None}
        temporary = self.folder / "session.json.tmp"
        temporary.write_text(json.dumps(state))
        os.replace(temporary, self.folder / "session.json")
        self.stamp = file_stamp(self.folder / "session.json")

    def describe(self) -> dict:
        return {"id": self.id, "observations": len(self.store),
                "occurrences": len(self.store.occurrences),
                "payload_bytes": self.store.num_payload_bytes,
                "turns": len(self.context.turns) if self.context else 0,
                "compactions": self.context.num_compactions if self.context else 0,
                "recalls": self.context.recall.num_recalls if self.context else 0,
                "requests": self.num_requests, "durable": self.folder is not None,
                "budgets": self.config.to_dict(),
                "budget_tokens": self.config.input_budget_tokens}

    def close(self) -> None:
        self.store.close()


class SessionManager:
    def __init__(self, counter, context_window: int, defaults: dict, store_dir: str | None = None,
                 shared: bool = False, lock_timeout_s: float = 60.0):
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
                    if (folder / "session.json").exists():
                        session = self.load(folder)
                        self.sessions[session.id] = session

    def load(self, folder: Path) -> Session:
        """A session as its folder holds it (its store read, its context rebuilt)."""
        state = json.loads((folder / "session.json").read_text())
        session = Session(state["id"], ArcConfig(**state["config"]), self.counter, folder,
                          state.get("prefix"), state.get("fingerprints"), state.get("full_tokens", 0),
                          state.get("num_requests", 0), state.get("tools"), state.get("context"))
        session.stamp = file_stamp(folder / "session.json")
        return session

    def config(self, overrides: dict | None) -> ArcConfig:
        overrides = dict(overrides or {})
        unknown = set(overrides) - BUDGET_FIELDS
        if unknown:
            raise SessionError(f"budgets: unknown field(s) {', '.join(sorted(unknown))}; known: "
                               f"{', '.join(sorted(BUDGET_FIELDS))}")
        values = {**self.defaults, **overrides}
        max_tokens = values.pop("max_tokens", 512)
        window = values.pop("context_window", self.context_window)
        if not isinstance(window, int) or isinstance(window, bool) or not 0 < window <= self.context_window:
            raise SessionError(f"budgets: context_window={window!r} must be an integer in "
                               f"1..{self.context_window} (the served model's max_model_len)")
        try:
            return ArcConfig.for_window(window, max_tokens, **values)
        except (TypeError, ValueError) as error:
            raise SessionError(f"budgets: {error}") from None

    def create(self, overrides: dict | None = None) -> Session:
        config = self.config(overrides)
        id = "sess_" + secrets.token_hex(12)
        folder = None
        if self.store_dir:
            folder = self.store_dir / id
            folder.mkdir()
        session = Session(id, config, self.counter, folder)
        session.save()
        if self.shared:
            session.store.release()
        self.sessions[id] = session
        return session

    @contextlib.asynccontextmanager
    async def using(self, id: str):
        """The session, for one request. Shared sessions (``shared=True``) are held by one
        process at a time: this takes the session's file lock (waiting for another process
        to finish its request), reloads the session if another process changed it since this
        one last had it, and on leaving releases the store and the lock."""
        if not self.shared:
            yield self.get(id)
            return
        folder = self.folder_of(id)
        lock = await asyncio.to_thread(FileLock.take, folder / "session.lock", self.lock_timeout_s)
        try:
            session = await asyncio.to_thread(self.check_out, id, folder)
            try:
                yield session
            finally:
                session.store.release()
        finally:
            lock.release()

    def folder_of(self, id: str) -> Path:
        folder = self.store_dir / id if isinstance(id, str) and id.startswith("sess_") else None
        if folder is None or "/" in id or not (folder / "session.json").exists():
            raise SessionError(f"no ARC session {id!r}; create one with POST /v1/arc/sessions", 404)
        return folder

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
        """A session owned by this process (not shared); shared ones go through ``using``."""
        session = self.sessions.get(id) if isinstance(id, str) else None
        if session is None:
            raise SessionError(f"no ARC session {id!r}; create one with POST /v1/arc/sessions", 404)
        return session

    def delete(self, id: str) -> None:
        session = self.get(id)
        del self.sessions[id]
        session.close()
        if session.folder:
            shutil.rmtree(session.folder)

    def close(self) -> None:
        for session in self.sessions.values():
            session.close()


if __name__ == "__main__":
    import sys

    for folder in sorted(Path(sys.argv[1]).iterdir()):
        if (folder / "session.json").exists():
            print(folder.name, json.loads((folder / "session.json").read_text())["config"]["context_window"])
