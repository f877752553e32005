"""The environment a process of this project starts with, one function per concern, called
where a process starts (the CLI, the launcher, the benchmarks, a test server's environment,
the tests' configuration), never in a constructor: a library object changes nothing global.

    go_offline()              nothing reaches beyond loopback: Hugging Face hub offline, vLLM's
                              and others' usage reports off, litellm's price list local, tiktoken's
                              BPE files from this project's cache (``core/tokens.py`` puts them
                              there); tokenizers fork no threads
    in_process_engine()       an engine in this process (``vllm.LLM``, ``VllmBackend``): no engine
                              subprocess, vLLM's cache under ours (an engine's KV cache size is
                              its own argument, ``kv_cache_memory_bytes``)

    go_offline()                        # this process
    env = go_offline(dict(os.environ))  # a child's environment
"""

from __future__ import annotations

import os

OFFLINE_ENVIRONMENT = {"HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1",
                       "TOKENIZERS_PARALLELISM": "false", "LITELLM_LOCAL_MODEL_COST_MAP": "True",
                       "RAY_USAGE_STATS_ENABLED": "0"}


def go_offline(environ=None):
    """Set each variable unless already set; returns the environment changed."""
    from arc_vllm.paths import tiktoken_dir

    environ = os.environ if environ is None else environ
    for key, value in {**OFFLINE_ENVIRONMENT, "TIKTOKEN_CACHE_DIR": str(tiktoken_dir())}.items():
        environ.setdefault(key, value)
    return environ


def in_process_engine(environ=None):
    """An in-process engine's settings, unless already set; returns the environment changed."""
    from arc_vllm.paths import vllm_cache_dir

    environ = os.environ if environ is None else environ
    for key, value in {"VLLM_ENABLE_V1_MULTIPROCESSING": "0", "VLLM_CACHE_ROOT": str(vllm_cache_dir())}.items():
        environ.setdefault(key, value)
    return environ
