"""A session's lock across processes: ``flock`` on ``DIR/<id>/session.lock``.

Shared sessions (several API servers, or engine replicas, over one ``--arc-store-dir``) are
served by one process at a time: the lock is held for the whole request, so two requests of
one session never interleave, whichever processes they reach. The OS drops the lock when its
holder dies, so a replica that crashes hands its sessions on without anyone clearing it.
"""

from __future__ import annotations

import os
from pathlib import Path

from arc_vllm.core.store_log import lock_within


class SessionBusy(TimeoutError):
    """Another process held the session for longer than the wait allowed."""


class FileLock:
    def __init__(self, fd: int):
        self.fd = fd

    @classmethod
    def take(cls, path: Path, timeout_s: float) -> "FileLock":
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        if not lock_within(fd, timeout_s):
            os.close(fd)
            raise SessionBusy(f"{path.parent.name}: served by another process for more "
                              f"than {timeout_s:.0f} s")
        return cls(fd)

    def release(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)  # closing the descriptor drops its flock
            self.fd = -1
