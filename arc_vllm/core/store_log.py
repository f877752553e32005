"""The ObsStore's backends: host memory (nothing to write), a durable append-only file, and
frames kept for a store elsewhere (``FrameLog``: a session store in Redis pushes them).

File layout (format version 1):

    header  16 bytes   b"ARCSTOR\\0", u16 version, u16 header length, u32 reserved
    frame   repeated   b"ARC\\x1e" sync, u64 payload length, u32 CRC-32 of payload, payload
    payload            b"N" new observation: i64 step, u8 has-rc, i64 rc, then the strings
                       full id, visible id, signature, content (each u64 length + UTF-8)
                       b"R" repeated occurrence: i64 step, then the visible id string

One ``ObsStore.append`` writes exactly one frame, so an append is all there or not at all.
A frame (``new_frame``, ``repeat_frame``; read back by ``frame_event``) is the same wherever it
is kept: a file holds them one after another, a Redis list one per element.
On open every frame is checked; a bad frame with no good frame after it is a torn tail
(a crash mid-write): it is cut off with a warning and every earlier frame is kept. A bad
frame *followed* by good ones is damage in the middle: opening fails and changes nothing,
because cutting there would drop acknowledged records.

Run ``python -m arc_vllm.core.store_log FILE`` to check a store file and print its counts.
"""

from __future__ import annotations

import fcntl
import mmap
import os
import struct
import time
import warnings
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

MAGIC = b"ARCSTOR\x00"
FORMAT_VERSION = 1
HEADER = struct.Struct("<8sHHI")
SYNC = b"ARC\x1e"
FRAME = struct.Struct("<4sQI")
NEW_FIXED = struct.Struct("<qBq")
REPEAT_FIXED = struct.Struct("<q")
LENGTH = struct.Struct("<Q")
FSYNC_POLICIES = ("always", "batch", "never")


class StoreFormatError(ValueError):
    """The file is not an ObsStore, or was written by an incompatible format version."""


class StoreCorruptError(ValueError):
    """The file is damaged before its tail; opening would lose acknowledged records."""


class StoreLockedError(RuntimeError):
    """Another process holds the store open."""


@dataclass(frozen=True)
class NewEvent:
    step: int
    returncode: int | None
    full_id: str
    id: str
    signature: str
    content: str


@dataclass(frozen=True)
class RepeatEvent:
    step: int
    id: str


class MemoryLog:
    """Host memory: the store's own indexes are the data, so there is nothing to write."""

    path = None

    def append_new(self, step, returncode, full_id, visible_id, signature_bytes, content_bytes):
        pass

    def append_repeat(self, step, visible_id):
        pass

    def events(self) -> Iterator[NewEvent | RepeatEvent]:
        return iter(())

    def sync(self) -> None:
        pass

    def close(self) -> None:
        pass

    def release(self) -> None:
        pass

    def reacquire(self, timeout_s: float = 30.0) -> bool:
        return True  # no other process can reach host memory


class FrameLog(MemoryLog):
    """Records kept as frames for a store elsewhere (a session in Redis): ``frames`` (what it
    held when made, checked) are replayed on open, and each append is kept as its frame until
    its owner takes it (``take``) and writes it; an append its owner could not write is dropped
    with the store that made it (nothing half-written is kept)."""

    def __init__(self, frames=(), where: str = "store"):
        self.path = where
        self._events = [frame_event(frame, where, index) for index, frame in enumerate(frames)]
        self.pending: list[bytes] = []

    def events(self) -> Iterator[NewEvent | RepeatEvent]:
        events, self._events = self._events, []
        return iter(events)

    def append_new(self, step, returncode, full_id, visible_id, signature_bytes, content_bytes):
        self.pending.append(new_frame(step, returncode, full_id, visible_id, signature_bytes, content_bytes))

    def append_repeat(self, step, visible_id):
        self.pending.append(repeat_frame(step, visible_id))

    def take(self) -> list[bytes]:
        """The frames appended since the last ``take``, in order."""
        frames, self.pending = self.pending, []
        return frames


def _string(data: bytes) -> list[bytes]:
    return [LENGTH.pack(len(data)), data]


def new_parts(step, returncode, full_id, visible_id, signature_bytes, content_bytes) -> list[bytes]:
    """The payload of a new observation's record, in parts (a large body is not copied)."""
    return [b"N", NEW_FIXED.pack(step, returncode is not None, returncode or 0),
            *_string(full_id.encode()), *_string(visible_id.encode()),
            *_string(signature_bytes), *_string(content_bytes)]


def repeat_parts(step, visible_id) -> list[bytes]:
    return [b"R", REPEAT_FIXED.pack(step), *_string(visible_id.encode())]


def framed(parts: list[bytes]) -> list[bytes]:
    """A payload's parts behind the frame header (sync, length, CRC-32 of the payload)."""
    crc = 0
    length = 0
    for part in parts:
        crc = zlib.crc32(part, crc)
        length += len(part)
    return [FRAME.pack(SYNC, length, crc), *parts]


def new_frame(step, returncode, full_id, visible_id, signature_bytes, content_bytes) -> bytes:
    """One new observation's record as one frame."""
    return b"".join(framed(new_parts(step, returncode, full_id, visible_id, signature_bytes, content_bytes)))


def repeat_frame(step, visible_id) -> bytes:
    """A repeated occurrence's record as one frame."""
    return b"".join(framed(repeat_parts(step, visible_id)))


def event_frame(event: NewEvent | RepeatEvent) -> bytes:
    """A record read back (``events``), as its frame again (to copy a store elsewhere)."""
    if isinstance(event, NewEvent):
        return new_frame(event.step, event.returncode, event.full_id, event.id, event.signature.encode(),
                         event.content.encode())
    return repeat_frame(event.step, event.id)


def frame_event(frame: bytes, where="store", index: int = 0) -> NewEvent | RepeatEvent:
    """The record one whole frame holds; ``StoreCorruptError`` if it is not one intact frame."""
    read = _read_frame(frame, 0, len(frame))
    if read is None or read[1] != len(frame):
        raise StoreCorruptError(f"{where}: record {index} is damaged (its checksum or length does not "
                                "match); refusing to open (nothing was changed)")
    return _decode(read[0], where)


class FileLog:
    """A durable append-only file of framed records. ``fsync``: ``always`` (every append is
    on disk before it is acknowledged), ``batch`` (at most once per ``batch_seconds``, and on
    close), ``never`` (left to the OS)."""

    def __init__(self, path: str | os.PathLike, fsync: str = "always", batch_seconds: float = 1.0):
        if fsync not in FSYNC_POLICIES:
            raise ValueError(f"fsync={fsync!r}: use one of {', '.join(FSYNC_POLICIES)}")
        self.path = Path(path)
        self.fsync = fsync
        self.batch_seconds = batch_seconds
        self._last_sync = time.monotonic()
        self._events: list[NewEvent | RepeatEvent] = []
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            try:
                fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise StoreLockedError(f"{self.path} is open in another process; "
                                       "one store file has one writer") from None
            self._end = self._load()
            self._inode = os.fstat(self._fd).st_ino
        except BaseException:
            os.close(self._fd)
            raise

    # -- opening -------------------------------------------------------------------------
    def _load(self) -> int:
        size = os.fstat(self._fd).st_size
        header = HEADER.pack(MAGIC, FORMAT_VERSION, HEADER.size, 0)
        if size < HEADER.size:
            existing = os.pread(self._fd, size, 0)
            if not header.startswith(existing):
                raise StoreFormatError(f"{self.path} is not an arc-vllm store (no store header)")
            if size:
                warnings.warn(f"{self.path}: torn header from an interrupted create; rewritten")
            os.ftruncate(self._fd, 0)
            os.pwrite(self._fd, header, 0)
            os.fsync(self._fd)
            return HEADER.size
        magic, version, header_length, _ = HEADER.unpack(os.pread(self._fd, HEADER.size, 0))
        if magic != MAGIC:
            raise StoreFormatError(f"{self.path} is not an arc-vllm store (bad magic {magic!r})")
        if version != FORMAT_VERSION or header_length != HEADER.size:
            raise StoreFormatError(
                f"{self.path} was written by store format version {version}; this arc-vllm "
                f"reads version {FORMAT_VERSION} only. Open it with a matching arc-vllm.")
        with mmap.mmap(self._fd, size, access=mmap.ACCESS_READ) as view:
            offset = HEADER.size
            while offset < size:
                frame = _read_frame(view, offset, size)
                if frame is None:
                    if _any_good_frame_after(view, offset + 1, size):
                        raise StoreCorruptError(
                            f"{self.path}: damaged record at byte {offset} with intact records "
                            "after it; refusing to open (nothing was changed). Restore the "
                            "file from a copy.")
                    warnings.warn(f"{self.path}: cut off a torn tail of {size - offset} bytes "
                                  f"at byte {offset} (an append interrupted by a crash)")
                    os.ftruncate(self._fd, offset)
                    os.fsync(self._fd)
                    return offset
                payload, offset = frame
                self._events.append(_decode(payload, self.path))
        return size

    def events(self) -> Iterator[NewEvent | RepeatEvent]:
        events, self._events = self._events, []
        return iter(events)

    # -- appending -----------------------------------------------------------------------
    def append_new(self, step, returncode, full_id, visible_id, signature_bytes, content_bytes):
        self._write(new_parts(step, returncode, full_id, visible_id, signature_bytes, content_bytes))

    def append_repeat(self, step, visible_id):
        self._write(repeat_parts(step, visible_id))

    def _write(self, parts: list[bytes]) -> None:
        frame = framed(parts)
        total = sum(len(part) for part in frame)
        try:
            written = 0
            while written < total:
                # writev keeps a large body in one copy; it may write less than asked.
                written += os.pwritev(self._fd, _remaining(frame, written), self._end + written)
            self._maybe_sync()
        except BaseException:
            # Leave no half frame behind: the file ends at the last acknowledged record.
            os.ftruncate(self._fd, self._end)
            raise
        self._end += total

    def _maybe_sync(self) -> None:
        if self.fsync == "always" or (
                self.fsync == "batch" and time.monotonic() - self._last_sync >= self.batch_seconds):
            os.fsync(self._fd)
            self._last_sync = time.monotonic()

    def sync(self) -> None:
        os.fsync(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            if self.fsync != "never":
                os.fsync(self._fd)
            os.close(self._fd)
            self._fd = -1

    # -- handing the file to another process ---------------------------------------------
    def release(self) -> None:
        """Give the file up (synced, its lock released); ``reacquire`` takes it back."""
        self.close()

    def reacquire(self, timeout_s: float = 30.0) -> bool:
        """Lock the file again, waiting up to ``timeout_s`` for another process to release it.
        True when it is as this log left it (same file, same length) and appends continue;
        False when another process wrote to it (the caller opens it afresh)."""
        fd = os.open(self.path, os.O_RDWR)
        if not lock_within(fd, timeout_s):
            os.close(fd)
            raise StoreLockedError(f"{self.path} stayed open in another process for "
                                   f"{timeout_s:.0f} s")
        self._fd = fd
        status = os.fstat(fd)
        return status.st_size == self._end and status.st_ino == self._inode


def lock_within(fd: int, timeout_s: float) -> bool:
    """An exclusive ``flock`` on ``fd``, waiting up to ``timeout_s`` for its holder (another
    process, or another descriptor of the same file); False when it is still held."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.005)


def _remaining(parts: list[bytes], skip: int) -> list[bytes]:
    if not skip:
        return parts
    out = []
    for part in parts:
        if skip >= len(part):
            skip -= len(part)
            continue
        out.append(memoryview(part)[skip:])
        skip = 0
    return out


def _read_frame(view, offset: int, size: int):
    """(payload, next offset) for a good frame at ``offset``, else None."""
    if offset + FRAME.size > size:
        return None
    sync, length, crc = FRAME.unpack_from(view, offset)
    start = offset + FRAME.size
    if sync != SYNC or start + length > size:
        return None
    payload = view[start:start + length]
    if zlib.crc32(payload) != crc:
        return None
    return payload, start + length


def _any_good_frame_after(view, offset: int, size: int) -> bool:
    while True:
        offset = view.find(SYNC, offset, size)
        if offset < 0:
            return False
        if _read_frame(view, offset, size) is not None:
            return True
        offset += 1


def _decode(payload: bytes, path) -> NewEvent | RepeatEvent:
    try:
        kind, position = payload[:1], 1
        if kind == b"N":
            step, has_rc, rc = NEW_FIXED.unpack_from(payload, position)
            position += NEW_FIXED.size
            strings = []
            for _ in range(4):
                (length,) = LENGTH.unpack_from(payload, position)
                position += LENGTH.size
                strings.append(payload[position:position + length].decode("utf-8"))
                position += length
            full_id, visible_id, signature, content = strings
            return NewEvent(step, rc if has_rc else None, full_id, visible_id, signature, content)
        if kind == b"R":
            (step,) = REPEAT_FIXED.unpack_from(payload, position)
            position += REPEAT_FIXED.size
            (length,) = LENGTH.unpack_from(payload, position)
            position += LENGTH.size
            return RepeatEvent(step, payload[position:position + length].decode("utf-8"))
    except (struct.error, UnicodeDecodeError) as error:
        raise StoreFormatError(f"{path}: a checksummed record does not parse ({error}); "
                               "the file was written by an incompatible writer") from None
    raise StoreFormatError(f"{path}: unknown record kind {bytes(kind)!r}")


if __name__ == "__main__":
    import sys

    log = FileLog(sys.argv[1], fsync="never")
    kinds = [type(event).__name__ for event in log.events()]
    print(f"{sys.argv[1]}: {kinds.count('NewEvent')} observations, "
          f"{len(kinds)} occurrences, {log._end} bytes")
    log.close()
