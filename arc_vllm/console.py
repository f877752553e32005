"""How the arc-vllm commands show what the library logs: library modules log (``logging``,
one logger per module, as vLLM's ``init_logger``); a command that runs them (replay, bench,
profile) calls ``show_progress()`` once, so their progress reaches stderr as plain lines.
``arc-vllm serve`` leaves logging to vLLM.
"""

from __future__ import annotations

import logging
import sys


def show_progress(level: int = logging.INFO) -> None:
    """arc_vllm's loggers to stderr, message only (idempotent)."""
    logger = logging.getLogger("arc_vllm")
    if any(getattr(handler, "arc_progress", False) for handler in logger.handlers):
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    handler.arc_progress = True
    logger.addHandler(handler)
    logger.setLevel(level)
    logger.propagate = False
