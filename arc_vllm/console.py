"""How the arc-vllm commands show what the library logs: library modules log (``logging``,
one logger per module, as vLLM's ``init_logger``); a command that runs them (replay, bench,
profile) calls ``show_progress()`` once, so their progress reaches stderr as plain lines.
Under ``vllm serve`` / ``arc-vllm serve`` the plugin calls ``log_through_vllm()`` in each of
vLLM's processes, so ARC's lines (the KV-reuse layout check, the recomputation it runs with)
come out with vLLM's, in its format and at its level.
"""

from __future__ import annotations

import logging
import sys


def show_progress(level: int = logging.INFO) -> None:
    """arc_vllm's loggers to stderr, message only (idempotent)."""
    logger = logging.getLogger("arc_vllm")
    if any(getattr(handler, "arc_progress", False) for handler in logger.handlers):
        return
    for handler in [h for h in logger.handlers if getattr(h, "arc_through_vllm", False)]:
        logger.removeHandler(handler)  # a command's own lines replace vLLM's format
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    handler.arc_progress = True
    logger.addHandler(handler)
    logger.setLevel(level)
    logger.propagate = False


class _ThroughVllm(logging.Handler):
    """Hands arc_vllm's records to vLLM's logger's handlers (vLLM's format, its stream)."""

    arc_through_vllm = True

    def emit(self, record: logging.LogRecord) -> None:
        for handler in logging.getLogger("vllm").handlers:
            if record.levelno >= handler.level:
                handler.handle(record)


def log_through_vllm() -> None:
    """arc_vllm's loggers out through vLLM's, at INFO (idempotent; a command's
    ``show_progress`` wins)."""
    logger = logging.getLogger("arc_vllm")
    if logger.handlers:
        return
    logger.addHandler(_ThroughVllm())
    logger.setLevel(logging.INFO)
    logger.propagate = False
