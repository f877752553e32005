"""The environment every process of this project starts with: nothing reaches beyond
loopback (Hugging Face hub offline, vLLM's and others' usage reports off) and tokenizers do not
fork threads. Called where a process starts (the CLI, the launcher, a test server's
environment), never in a constructor.

    go_offline()                      # this process
    env = go_offline(dict(os.environ))  # a child's environment
"""

from __future__ import annotations

import os

OFFLINE_ENVIRONMENT = {"HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1",
                       "TOKENIZERS_PARALLELISM": "false"}


def go_offline(environ=None):
    """Set each variable unless already set; returns the environment changed."""
    environ = os.environ if environ is None else environ
    for key, value in OFFLINE_ENVIRONMENT.items():
        environ.setdefault(key, value)
    return environ
