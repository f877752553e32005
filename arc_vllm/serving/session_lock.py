"""A session's lock across processes: ``DIR/<id>/session.lock``, held with ``filelock``.

Shared sessions (several API servers, or engine replicas, over one ``--arc-store-dir``) are
served by one process at a time: the lock is held for the whole request, so two requests of
one session never interleave, whichever processes they reach. The OS drops the lock when its
holder dies, so a replica that crashes hands its sessions on without anyone clearing it.
"""

from __future__ import annotations

from pathlib import Path

import filelock


class SessionBusy(TimeoutError):
    """Another process held the session for longer than the wait allowed."""


def take(path: Path, timeout_s: float) -> filelock.BaseFileLock:
    """The session's lock, acquired (released with ``.release()``). Not thread-local: it is
    taken in a worker thread and released on the event loop's."""
    lock = filelock.FileLock(path, timeout=timeout_s, thread_local=False)
    try:
        lock.acquire()
    except filelock.Timeout:
        raise SessionBusy(f"{path.parent.name}: served by another process for more "
                          f"than {timeout_s:.0f} s") from None
    return lock
