"""A session's lock across processes: ``DIR/<id>/session.lock``, held with ``filelock``.

Shared sessions (several API servers, or engine replicas, over one ``--arc-store-dir``) are
served by one process at a time: the lock is held for the whole request, so two requests of
one session never interleave, whichever processes they reach. The OS drops the lock when its
holder dies, so a replica that crashes hands its sessions on without anyone clearing it.

A request waits for a lock on the event loop (``take_async``: tried without blocking, again
as ``storage.poll`` backs off), never in a worker thread: a process's few worker threads all waiting for a
lock whose holder needs one of them to finish would wait for each other until the timeout.
"""

from __future__ import annotations

from pathlib import Path

import filelock

from arc_vllm.serving.errors import SessionBusy
from arc_vllm.serving.sessions.storage import poll


def take(path: Path, timeout_s: float) -> filelock.BaseFileLock:
    """The session's lock, acquired (released with ``.release()``). Not thread-local: it is
    taken in a worker thread and released on the event loop's."""
    lock = filelock.FileLock(path, timeout=timeout_s, thread_local=False)
    try:
        lock.acquire()
    except filelock.Timeout:
        raise busy(path, timeout_s) from None
    return lock


async def take_async(path: Path, timeout_s: float) -> filelock.BaseFileLock:
    """``take``, waiting on the event loop instead of in a thread."""
    lock = filelock.FileLock(path, timeout=0, thread_local=False)

    async def attempt():
        try:
            lock.acquire(timeout=0)
        except filelock.Timeout:
            return None
        return lock

    return await poll(attempt, timeout_s, lambda: busy(path, timeout_s))


def busy(path: Path, timeout_s: float) -> SessionBusy:
    return SessionBusy(f"{path.parent.name}: served by another process for more than {timeout_s:.0f} s")
