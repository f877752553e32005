"""Processes found by their title (Ray names its workers ``ray::<task or actor>``), for tests
that kill one to cause a real fault."""

from pathlib import Path


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
