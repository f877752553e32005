"""Processes found by their title (Ray names its workers ``ray::<task or actor>``), for tests
that kill one to cause a real fault; and the environment of engine processes run side by side,
and how many run at once."""

import os
from pathlib import Path


def side_by_side(**extra: str) -> dict:
    """This process's environment for an engine process that runs beside another, plus
    ``extra``: one torch thread, so each keeps to a core (with two threads each, an engine's
    second thread spins at every step while the other process holds the cores: two kv-reuse
    bench runs took 100 s at once on two threads, 59 s in turn, 35 s at once on one)."""
    return dict(os.environ, OMP_NUM_THREADS="1", **extra)


def engines_at_once() -> int:
    """How many engine processes a test runs at once: two, one per core; one inside a run that
    already runs beside another (``tests/test_cpu_builds.py``'s class runs set
    ``ARC_TEST_ENGINES_AT_ONCE=1``: two runs of two engines each held four engines, 11 GB, and
    no more cores)."""
    return int(os.environ.get("ARC_TEST_ENGINES_AT_ONCE", "2"))


def processes_titled(prefix: bytes) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                title = (entry / "cmdline").read_bytes().split(b"\0")[0]
            except OSError:
                continue
            if title.startswith(prefix):
                found.append(int(entry.name))
    return found
