"""ObsStore: the append-only, content-addressed archive of every tool observation.

id = SHA1(signature + b"\\x1f" + observation), both UTF-8. The visible id is the first 8 hex
characters; when a *different* observation already holds it, 4 more characters are taken at
a time until it is unique. Ids never change once given. The same (signature, observation)
gets the same id again, and the occurrence log records every occurrence (step, id), so the
ordered observation history rebuilds exactly from the store (``history()``).

Observations are ``str``. ``bytes`` are accepted when they are valid UTF-8 and stored as the
decoded text (decoding valid UTF-8 is lossless, so ``content.encode()`` gives the bytes back);
other bytes, lone surrogates and non-text types are refused with a clear error before
anything is written.

Backends (``store_log``): host memory by default; ``ObsStore.open(path)`` for a durable file.

Run ``python -m arc_vllm.core.store`` for a small demonstration.
"""

from __future__ import annotations

import hashlib
import os
from typing import Iterator, NamedTuple

from arc_vllm.core.store_log import FileLog, MemoryLog, NewEvent

SEPARATOR = b"\x1f"
_new_tuple = tuple.__new__


class UnknownObservation(KeyError):
    """No observation with that id in this store."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "unknown observation"


class ObsRecord(NamedTuple):
    """One stored observation, immutable. Metadata is derived from the content on demand (a
    tuple is the cheapest record to create on the append path); recall bookkeeping and token
    counts live in the store (``recall_stats``, ``tokens``)."""

    id: str
    full_id: str
    signature: str
    content: str
    returncode: int | None
    step: int
    head_chars: int = 120
    tail_chars: int = 80

    @property
    def chars(self) -> int:
        return len(self.content)

    @property
    def lines(self) -> int:
        content = self.content
        return content.count("\n") + (1 if content and not content.endswith("\n") else 0)

    @property
    def head(self) -> str:
        return self.content[:self.head_chars]

    @property
    def tail(self) -> str:
        # The tail preview never repeats what the head already shows.
        if not self.tail_chars:
            return ""
        return self.content[max(self.head_chars, len(self.content) - self.tail_chars):]

    def __repr__(self) -> str:
        return f"ObsRecord(§{self.id}, {self.signature!r}, {self.chars} chars, step {self.step})"


def as_text(value, what: str) -> tuple[str, bytes]:
    """``value`` as (text, UTF-8 bytes), or a clear error saying what was wrong."""
    if isinstance(value, str):
        text = value
    elif isinstance(value, (bytes, bytearray, memoryview)):
        try:
            text = bytes(value).decode("utf-8")
        except UnicodeDecodeError as error:
            raise ValueError(
                f"{what} bytes are not valid UTF-8 (byte {error.start}); decode them first, "
                "e.g. data.decode('utf-8', 'backslashreplace'), so the stored text is exactly "
                "what you mean") from None
    else:
        raise TypeError(f"{what} must be str (or UTF-8 bytes), not {type(value).__name__}")
    try:
        return text, text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise ValueError(f"{what} contains a lone surrogate at index {error.start}; such text "
                         "has no UTF-8 form and cannot be stored") from None


class ObsStore:
    """Append-only, content-addressed observation store (host memory unless opened on a file).

    ``visible_id_chars`` and ``id_extend_chars`` are the paper's 8 and 4; tests shorten the
    first to force visible-id collisions.
    """

    def __init__(self, log=None, *, head_preview_chars: int = 120, tail_preview_chars: int = 80,
                 visible_id_chars: int = 8, id_extend_chars: int = 4):
        if not 1 <= visible_id_chars <= 40 or id_extend_chars < 1:
            raise ValueError("visible_id_chars must be 1..40 and id_extend_chars >= 1")
        self.log = log if log is not None else MemoryLog()
        self.head_preview_chars = head_preview_chars
        self.tail_preview_chars = tail_preview_chars
        self.visible_id_chars = visible_id_chars
        self.id_extend_chars = id_extend_chars
        self._by_id: dict[str, ObsRecord] = {}
        self._id_by_full: dict[str, str] = {}
        self.occurrences: list[tuple[int, str]] = []
        self.num_payload_bytes = 0
        self._recalls: dict[str, tuple[int, int]] = {}
        self._tokens: dict[str, int] = {}
        for event in self.log.events():
            if isinstance(event, NewEvent):
                self._index(ObsRecord(event.id, event.full_id, event.signature, event.content,
                                      event.returncode, event.step, head_preview_chars,
                                      tail_preview_chars), len(event.content.encode()))
            else:
                if event.id not in self._by_id:
                    raise ValueError(f"{self.log.path}: occurrence of unknown id {event.id}")
                self.occurrences.append((event.step, event.id))

    @classmethod
    def open(cls, path: str | os.PathLike, fsync: str = "always", **options) -> "ObsStore":
        """A durable store on ``path`` (created if missing); the index is rebuilt on open."""
        return cls(FileLog(path, fsync=fsync), **options)

    # -- writing -------------------------------------------------------------------------
    def append(self, signature, observation, *, step: int, returncode: int | None = None) -> ObsRecord:
        """Store one occurrence of ``observation`` produced by the action ``signature``."""
        # The common case (str in, ASCII or valid text) stays on a short path; anything else
        # goes through as_text for its conversion or its clear error.
        try:
            signature_bytes = signature.encode("utf-8")
            content_bytes = observation.encode("utf-8")
            if type(signature) is not str or type(observation) is not str:
                raise TypeError
        except (AttributeError, TypeError, UnicodeEncodeError):
            signature, signature_bytes = as_text(signature, "signature")
            observation, content_bytes = as_text(observation, "observation")
        if type(step) is not int:
            raise TypeError(f"step must be int, not {type(step).__name__}")
        if returncode is not None and type(returncode) is not int:
            raise TypeError(f"returncode must be int or None, not {type(returncode).__name__}")
        if len(content_bytes) < 65536:  # one call is cheaper than three for small bodies
            full_id = hashlib.sha1(signature_bytes + SEPARATOR + content_bytes).hexdigest()
        else:  # ...and no copy of a large one
            digest = hashlib.sha1(signature_bytes)
            digest.update(SEPARATOR)
            digest.update(content_bytes)
            full_id = digest.hexdigest()
        known = self._id_by_full.get(full_id)
        if known is not None:
            self.log.append_repeat(step, known)
            self.occurrences.append((step, known))
            return self._by_id[known]
        visible = full_id[:self.visible_id_chars]
        if visible in self._by_id:
            visible = self._visible_id(full_id)
        self.log.append_new(step, returncode, full_id, visible, signature_bytes, content_bytes)
        # tuple.__new__ directly: NamedTuple's own __new__ is a Python-level call.
        record = _new_tuple(ObsRecord, (visible, full_id, signature, observation, returncode,
                                        step, self.head_preview_chars, self.tail_preview_chars))
        self._by_id[visible] = record
        self._id_by_full[full_id] = visible
        self.occurrences.append((step, visible))
        self.num_payload_bytes += len(content_bytes)
        return record

    def _visible_id(self, full_id: str) -> str:
        width = self.visible_id_chars
        while full_id[:width] in self._by_id:
            width += self.id_extend_chars
            if width > len(full_id):
                raise RuntimeError(f"full SHA1 collision on {full_id}")  # not reachable in practice
        return full_id[:width]

    def _index(self, record: ObsRecord, payload_bytes: int) -> None:
        self._by_id[record.id] = record
        self._id_by_full[record.full_id] = record.id
        self.occurrences.append((record.step, record.id))
        self.num_payload_bytes += payload_bytes

    def note_recall(self, id: str, step: int) -> None:
        """Recall bookkeeping (in memory: a recall never writes the archive)."""
        record = self.get(id)
        count, _ = self._recalls.get(record.id, (0, None))
        self._recalls[record.id] = (count + 1, step)

    def recall_stats(self, id: str) -> tuple[int, int | None]:
        """(number of recalls, step of the last one) for a stored observation."""
        return self._recalls.get(self.get(id).id, (0, None))

    # -- reading -------------------------------------------------------------------------
    def get(self, id: str) -> ObsRecord:
        record = self._by_id.get(id.removeprefix("§") if isinstance(id, str) else id)
        if record is None:
            raise UnknownObservation(f"no observation §{id} in this store")
        return record

    def __contains__(self, id: object) -> bool:
        return isinstance(id, str) and id.removeprefix("§") in self._by_id

    def __len__(self) -> int:
        return len(self._by_id)

    def records(self) -> Iterator[ObsRecord]:
        """Distinct observations in creation order."""
        return iter(self._by_id.values())

    def ids(self) -> list[str]:
        return list(self._by_id)

    def history(self) -> list[str]:
        """The ordered observation history, rebuilt from the occurrence log."""
        return [self._by_id[id].content for _, id in self.occurrences]

    def tokens(self, id: str, counter) -> int:
        """Token length of a stored body, counted once and remembered."""
        record = self.get(id)
        count = self._tokens.get(record.id)
        if count is None:
            count = self._tokens[record.id] = counter.count(record.content)
        return count

    def sync(self) -> None:
        self.log.sync()

    def close(self) -> None:
        self.log.close()

    def release(self) -> None:
        """Let another process open this store's file (a durable store; a no-op in memory)."""
        self.log.release()

    def reacquire(self, timeout_s: float = 30.0) -> bool:
        """Take the file back: True if nobody wrote to it meanwhile (see ``FileLog``)."""
        return self.log.reacquire(timeout_s)

    def __enter__(self) -> "ObsStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


if __name__ == "__main__":
    store = ObsStore()
    first = store.append("cat secrets.txt", "THE NEEDLE FOR THIS TASK\nabc\n", step=1, returncode=0)
    again = store.append("cat secrets.txt", "THE NEEDLE FOR THIS TASK\nabc\n", step=2, returncode=0)
    print(first, first.id == again.id, store.occurrences, store.history() == [first.content] * 2)
