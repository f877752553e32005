"""Shared fixtures: real tokenizers (the embedded model's, and tiktoken o200k_base, offline).

The embedded model must be prepared first (``bash scripts/setup.sh``); without it the
fixture fails with that instruction instead of skipping, because every property here is
stated in the serving model's real tokens.
"""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("VLLM_NO_USAGE_STATS", "1")
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "arc", deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                 HealthCheck.function_scoped_fixture])
settings.load_profile("arc")


@pytest.fixture(scope="session")
def smol():
    """The embedded model's own tokenizer and chat template."""
    from arc_vllm.core.tokens import load_counter

    return load_counter(None)


@pytest.fixture(scope="session")
def o200k():
    from arc_vllm.core.tokens import TiktokenCounter

    return TiktokenCounter("o200k_base")
