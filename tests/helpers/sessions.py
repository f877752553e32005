"""Sessions for tests that drive the ARC path without a server: the manager's calls that may
reach its storage are coroutines; in host memory they finish at once, so a synchronous test
runs them to completion here.

    session = created(SessionManager(counter, 4096, {}), {"context_window": 2048})
"""

from __future__ import annotations

import asyncio


def created(manager, *args, **options):
    """A new session of ``manager`` (``SessionManager.create``)."""
    return asyncio.run(manager.create(*args, **options))
