"""One folder for what a test run's processes write to temporary files, so the run leaves
nothing in /tmp: ``TMPDIR`` of every process the tests start (vLLM's ``vllm_dist_*``
rendezvous files and ZMQ sockets, Ray's sessions, Chromium's profiles, the Prometheus files of
servers killed with -9) and the ZMQ sockets of this process's own engines
(``VLLM_RPC_BASE_PATH``). The run removes it when it passes and names it when it fails
(``tests/conftest.py``).

This process keeps its own temporary folder (pytest's ``tmp_path`` stays where it was: Redis's
Unix sockets under it must stay within 107 characters), and torch's compile cache stays where
torch keeps it by default, so no run compiles again what an earlier one did.

    from tests.helpers.scratch import take_over
    folder = take_over()      # once, before anything starts a process
"""

from __future__ import annotations

import getpass
import os
import tempfile
from pathlib import Path


def take_over() -> Path:
    here = tempfile.gettempdir()
    folder = Path(tempfile.mkdtemp(prefix="arc-test-run-"))
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(Path(here) / f"torchinductor_{getpass.getuser()}"))
    os.environ["TMPDIR"] = str(folder)
    os.environ["VLLM_RPC_BASE_PATH"] = str(folder)
    tempfile.tempdir = here  # read once per process: this one keeps its own
    return folder
