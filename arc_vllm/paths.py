"""Where arc-vllm keeps its caches: one predictable root, so a second run is fast.

``ARC_VLLM_CACHE`` (default ``~/.cache/arc-vllm``) holds ``models/`` (the embedded default
model as a Hugging Face folder), ``tiktoken/`` (offline BPE files), ``vllm/`` (vLLM's
compile cache) and ``npm/`` (the coding CLIs the tests drive, pinned: Claude Code, Codex). Run ``python -m arc_vllm.paths`` to print them.
"""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    return Path(os.environ.get("ARC_VLLM_CACHE") or Path.home() / ".cache" / "arc-vllm")


def models_dir() -> Path:
    return cache_root() / "models"


def tiktoken_dir() -> Path:
    return cache_root() / "tiktoken"


def vllm_cache_dir() -> Path:
    return cache_root() / "vllm"


def npm_bin_dir() -> Path:
    return cache_root() / "npm" / "node_modules" / ".bin"


if __name__ == "__main__":
    for name in ("cache_root", "models_dir", "tiktoken_dir", "vllm_cache_dir", "npm_bin_dir"):
        print(f"{name}: {globals()[name]()}")
