"""What a store holds of a session's state, and what changed since: the per-request write of a
store that appends (``sessions/redis_store.py``), so a request costs what it added, not what
the session holds.

A session's state (``Session.state``) is its rest, bounded by the budgets (``Session.rest``),
and its growing parts (``PARTS``: fingerprints, records, turns, catalog order, Cited set),
which only grow while its context lives. ``Written`` keeps, per session, the growing parts as
last written (the live objects, by reference: no copy of any text), the tools and the store's
version. ``Written.changes(session)`` compares them with the session now:

    Change(name, reset, items)   ``reset``: rewrite the part from ``items`` (a rewritten history,
                                 a records ring that turned over unseen, a part written first);
                                 else append ``items``

Lists are compared by value (identical objects compare at once, so the usual case costs a
pointer comparison per item); the records ring is searched from its end for the last one
written; the Cited set by set difference. Items come as the text the store keeps: a turn as
its snapshot JSON, a record as JSON, ids and fingerprints as they are.

Run ``python -m arc_vllm.serving.sessions.parts`` for an example.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from arc_vllm.serving.sessions.session import PART, part_item


@dataclass(frozen=True)
class Change:
    name: str
    reset: bool          # rewrite the whole part from ``items``
    items: list[str]     # what to append (or, with ``reset``, the whole part)


def encoded(name: str, items) -> list[str]:
    """Items of a growing part as the text a store keeps."""
    if PART[name].json:
        return [json.dumps(part_item(name, item), ensure_ascii=False, separators=(",", ":")) for item in items]
    return list(items)


def encoded_items(name: str, items) -> list[str]:
    """Items of a growing part as a whole state holds them (JSON-able: a turn's snapshot form),
    as the text a store keeps."""
    if PART[name].json:
        return [json.dumps(item, ensure_ascii=False, separators=(",", ":")) for item in items]
    return [str(item) for item in items]


def decoded(name: str, items) -> list:
    """The text a store kept, back as the state's items (``join_state`` takes them)."""
    texts = [item.decode("utf-8") if isinstance(item, bytes) else item for item in items]
    return [json.loads(text) for text in texts] if PART[name].json else texts


@dataclass
class Written:
    """What the store holds of one session, as this process last wrote or read it."""

    version: int = 0
    parts: dict = field(default_factory=dict)  # name -> the live objects written (a list; cited a set)
    tools: object = None                       # the tools last written (compared by value)

    @classmethod
    def of(cls, session, version: int) -> "Written":
        """The session as it now is, held at ``version``."""
        written = cls(version)
        written.take(session)
        return written

    def take(self, session, version: int | None = None) -> None:
        """The session's growing parts and tools are now what the store holds."""
        self.parts = {name: (set(live) if PART[name].kind == "set" else list(live))
                      for name, live in session.growing().items()}
        self.tools = session.context.tools if session.context else None
        if version is not None:
            self.version = version

    def changes(self, session) -> list[Change]:
        """Each growing part that changed since it was written: what to append, or rewrite."""
        out = []
        for name, live in session.growing().items():
            change = self.change(name, live)
            if change is not None:
                out.append(change)
        return out

    def change(self, name: str, live) -> Change | None:
        before, kind = self.parts.get(name), PART[name].kind
        if kind == "set":
            if before is not None and before <= live:
                new = live - before
                return Change(name, False, sorted(new)) if new else None
            return Change(name, True, sorted(live))
        if kind == "ring":  # the last MAX_RECORDS: what follows the last one written
            if before is not None and not before:
                return Change(name, False, encoded(name, live)) if live else None
            if before:
                last = before[-1]
                for index in range(len(live) - 1, -1, -1):
                    if live[index] is last:
                        new = [live[at] for at in range(index + 1, len(live))]
                        return Change(name, False, encoded(name, new)) if new else None
            return Change(name, True, encoded(name, live))
        count = len(before) if before is not None else -1
        if before is not None and len(live) >= count and live[:count] == before:
            return Change(name, False, encoded(name, live[count:])) if len(live) > count else None
        return Change(name, True, encoded(name, live))

    def tools_changed(self, session) -> bool:
        tools = session.context.tools if session.context else None
        return tools != self.tools


if __name__ == "__main__":
    from arc_vllm.core.config import ArcConfig
    from arc_vllm.core.tokens import TiktokenCounter
    from arc_vllm.offline import go_offline
    from arc_vllm.serving.sessions.session import Session

    go_offline()
    session = Session("sess_" + "0" * 24, ArcConfig.for_window(4096, 512), TiktokenCounter())
    messages = [{"role": "user", "content": "Read the log."}, {"role": "assistant", "content": "cat log"},
                {"role": "user", "content": "line\n" * 50}]
    session.take_in(messages, None)
    written = Written.of(session, 1)
    session.take_in(messages + [{"role": "assistant", "content": "wc log"}, {"role": "user", "content": "50"}], None)
    for change in written.changes(session):
        print(change.name, "rewrite" if change.reset else "append", change.items)
