"""Which storage ``--arc-store`` names: one place to read the option, for the server, the Ray
front and ``arc-vllm store copy``.

    (unset)                         host memory (``MemoryStorage``): sessions end with the process
    DIR (or --arc-store-dir DIR)    a folder (``FolderStorage``); ``--arc-shared-sessions``: several
                                    processes on one machine serve it
    redis://[user:pass@]host:port/db, rediss://... (TLS), unix:///path/redis.sock?db=N
                                    Redis or Valkey (``RedisStorage``): shared by every replica on
                                    every node that reaches it

Run ``python -m arc_vllm.serving.sessions.places URL`` to see what a value names.
"""

from __future__ import annotations

from arc_vllm.serving.sessions.folder import FolderStorage
from arc_vllm.serving.sessions.storage import MemoryStorage, SessionStorage

REDIS_SCHEMES = ("redis://", "rediss://", "unix://")


def is_redis(store) -> bool:
    return isinstance(store, str) and store.startswith(REDIS_SCHEMES)


def storage_for(store=None, shared: bool = False, lock_timeout_s: float = 60.0, **redis_options) -> SessionStorage:
    """The storage ``store`` names (a URL of Redis, a folder's path, or None: host memory).
    ``shared``: several processes serve a folder (Redis is always shared). ``redis_options``:
    ``RedisStorage``'s (the lease, the timeout, the retention as expiry)."""
    if is_redis(store):
        from arc_vllm.serving.sessions.redis_store import RedisStorage  # the redis client, only here

        return RedisStorage(store, lock_timeout_s=lock_timeout_s, **redis_options)
    if shared and not store:
        raise ValueError("shared sessions (several API servers or replicas) need a store every "
                         "process can reach: --arc-store redis://HOST:PORT (any node) or --arc-store DIR "
                         "(one machine)")
    return FolderStorage(store, shared, lock_timeout_s) if store else MemoryStorage()


if __name__ == "__main__":
    import sys

    print(type(storage_for(sys.argv[1] if len(sys.argv) > 1 else None)).__name__)
