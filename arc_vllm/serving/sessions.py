"""Server-side ARC sessions: one ArcContext per session, in host memory or in a store folder.

With a store folder (``--arc-store-dir``) each session lives in ``DIR/<id>/``: ``store.arc``
(the durable ObsStore, fsync on every append) and ``session.json`` (task prefix, budgets,
the fingerprints of the messages taken in), replaced atomically after each request. On start
every session found there is opened again, so sessions survive a restart (kill -9 included)
with every acknowledged observation. Ids are random; an id of one session never resolves in
another, because each session has its own store.

Run ``python -m arc_vllm.serving.sessions DIR`` to list the sessions kept in DIR.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import shutil
from dataclasses import fields
from pathlib import Path

from arc_vllm.core.config import ArcConfig
from arc_vllm.core.context import DEFAULT_SYSTEM, ArcContext
from arc_vllm.core.store import ObsStore

BUDGET_FIELDS = {f.name for f in fields(ArcConfig)} - {"context_window"}


class SessionError(ValueError):
    """A bad session request: ``status`` is the HTTP status to answer with."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


class Session:
    def __init__(self, id: str, config: ArcConfig, counter, folder: Path | None,
                 prefix: list[dict] | None = None, fingerprints: list[str] | None = None):
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
        self.full_tokens = 0  # the conversation's size without ARC, beyond the task prefix
        self.context: ArcContext | None = None
        self.num_requests = 0
        if prefix:
            self.start(prefix)

    def start(self, prefix: list[dict]) -> None:
        """Fix the task prefix F (system prompt + task) at the first request."""
        system = "\n\n".join(m.get("content") or "" for m in prefix if m.get("role") != "user")
        task = "\n\n".join(m.get("content") or "" for m in prefix if m.get("role") == "user")
        # The client's system prompt, then ARC's note on stubs and commands.
        system = f"{system}\n\n{DEFAULT_SYSTEM}" if system else DEFAULT_SYSTEM
        context = ArcContext(self.config, self.counter, task=task or "(no task given)",
                             store=self.store, system=system)
        self.context = context
        self.prefix = prefix

    def save(self) -> None:
        if self.folder is None:
            return
        state = {"id": self.id, "config": self.config.to_dict(),
                 "prefix": self.prefix, "fingerprints": self.fingerprints}
        temporary = self.folder / "session.json.tmp"
        temporary.write_text(json.dumps(state))
        os.replace(temporary, self.folder / "session.json")

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
    def __init__(self, counter, context_window: int, defaults: dict, store_dir: str | None = None):
        self.counter = counter
        self.context_window = context_window
        self.defaults = defaults
        self.store_dir = Path(store_dir) if store_dir else None
        self.sessions: dict[str, Session] = {}
        self.config(None)  # fail at start, not at the first session, if the defaults are bad
        if self.store_dir:
            self.store_dir.mkdir(parents=True, exist_ok=True)
            for folder in sorted(self.store_dir.iterdir()):
                state_file = folder / "session.json"
                if state_file.exists():
                    state = json.loads(state_file.read_text())
                    config = ArcConfig(**state["config"])
                    self.sessions[state["id"]] = Session(
                        state["id"], config, counter, folder, state.get("prefix"),
                        state.get("fingerprints"))

    def config(self, overrides: dict | None) -> ArcConfig:
        overrides = dict(overrides or {})
        unknown = set(overrides) - BUDGET_FIELDS
        if unknown:
            raise SessionError(f"budgets: unknown field(s) {', '.join(sorted(unknown))}; known: "
                               f"{', '.join(sorted(BUDGET_FIELDS))}")
        values = {**self.defaults, **overrides}
        max_tokens = values.pop("max_tokens", 512)
        try:
            return ArcConfig.for_window(self.context_window, max_tokens, **values)
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
        self.sessions[id] = session
        return session

    def get(self, id: str) -> Session:
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
