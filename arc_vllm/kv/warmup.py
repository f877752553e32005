"""Warm-up stages: send a compacted view in pieces, so the connector's claims start where
reusable runs start. One planner, behind a "send these prompts" callable, used by the API
server (``serving/step/kv_warmup.py``), the in-process backend (``VllmBackend(kv_reuse=True)``) and
``arc-vllm bench kv-reuse``.

A compaction rewrites what follows the task prefix F (the summary S, the catalog page) and
keeps recent turns that the engine computed in the session's last view, further along, with
new text (stubs, the new turn) between them. vLLM lets a KV connector claim only the run right
after the prefix-cache hit, which here is new text. So, when the session's last view holds long
runs of this view past the hit, the view is cut into stages (``spans.warmup_boundaries``) and
each stage's tokens are sent first as a one-token request of the session marked
``arc_kv_save: false``: the connector claims the run at the stage's start, the engine computes
the new text up to where the next run starts, its whole blocks join the prefix cache and the
worker keeps its last partial block. The real request is the last stage. The planner replays
the connector's claims per session (``claims.ClaimReplay``), so it knows which runs' KV was
already moved ``max_moves`` times: no stage is sent for a run the connector would not claim
(without the replay such stages claimed nothing, and the movable rest of a chain such a run
began went unclaimed; docs/kv-reuse.md has the figures and their command). The replay assumes every planned claim was
made; where the engine claimed less (a session dropped from host memory), a stage may be
skipped that could have claimed, never a wrong answer. ``recompute_tokens`` makes every claimed run
start that many tokens in, so its first tokens are computed, seeing the new text before them
(CacheBlend's selective recomputation).

    planner = WarmupPlanner.of_vllm(vllm_config)   # the engine's block size, min_run, dtype
    sent = planner.warm_up([(session, view_token_ids)], send)   # send(list[Stage]) -> results

Pure Python: ``send`` is whatever runs prompts on the engine.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from cachetools import LRUCache

from arc_vllm.kv.claims import ClaimReplay
from arc_vllm.kv.config import KVReuseConfig, default_recompute_tokens
from arc_vllm.kv.extra_args import ArcExtraArgs
from arc_vllm.kv.spans import prefix_hit

MAX_SESSIONS = 1024  # sessions' last views kept; the least recently used is forgotten first

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Stage:
    session: str
    prompt: list[int]  # the view's first tokens, to the stage's boundary (``ClaimReplay.stages``)
    extra_args: dict  # the request's ARC keys: the session, not saved, recompute_tokens


class WarmupPlanner:
    """Remembers each session's last view and its moves (an LRU of ``max_sessions``) and plans
    the next view's stages against it, with the connector's ``min_run``, ``min_gain`` and
    ``max_moves``."""

    def __init__(self, block_size: int, config: KVReuseConfig | None = None, recompute_tokens: int = 0,
                 max_sessions: int = MAX_SESSIONS):
        config = config or KVReuseConfig()
        self.block_size = block_size
        self.config = config
        self.recompute_tokens = recompute_tokens
        self.sessions: LRUCache = LRUCache(maxsize=max_sessions)  # session -> its ClaimReplay

    @classmethod
    def of_vllm(cls, vllm_config, recompute_tokens: int | None = None) -> "WarmupPlanner":
        """The planner for an engine: its block size, its connector's ``min_run``, and
        ``recompute_tokens`` (None: the default for the engine's dtype, ``kv/config.py``)."""
        dtype = str(vllm_config.model_config.dtype).removeprefix("torch.")
        chosen = "given" if recompute_tokens is not None else f"the default for {dtype}"
        if recompute_tokens is None:
            recompute_tokens = default_recompute_tokens(dtype)
        logger.info("KV reuse: the first %d tokens of each reused run are recomputed (%s)",
                    recompute_tokens, chosen)
        return cls(vllm_config.cache_config.block_size, KVReuseConfig.of_vllm(vllm_config), recompute_tokens)

    def plan(self, session: str, tokens: list[int]) -> list[Stage]:
        """The stages to send before ``tokens`` (empty: none); ``tokens`` becomes the session's
        last view."""
        replay = self.sessions.get(session)
        if replay is None:
            config = self.config
            replay = self.sessions[session] = ClaimReplay(self.block_size, config.min_run, self.recompute_tokens,
                                                          config.max_moves, config.min_gain)
        last = replay.saved.tokens if replay.saved is not None else None
        boundaries = replay.stages(tokens, prefix_hit(last, tokens, self.block_size))
        extra = ArcExtraArgs(session=session, save=False, recompute_tokens=self.recompute_tokens).to_dict()
        return [Stage(session, tokens[:boundary], extra) for boundary in boundaries]

    def warm_up(self, views: list[tuple[str, list[int]]],
                send: Callable[[list[Stage]], list]) -> list[tuple[Stage, object]]:
        """Plan every view's stages and send them: stage k of every view in one call of
        ``send`` (a batch), after stage k-1's, since each needs the last one's blocks in the
        prefix cache. Returns each stage sent with what ``send`` returned for it."""
        plans = [self.plan(session, tokens) for session, tokens in views]
        sent = []
        for k in range(max(map(len, plans), default=0)):
            batch = [plan[k] for plan in plans if k < len(plan)]
            sent.extend(zip(batch, send(batch)))
        return sent

    def forget(self) -> None:
        self.sessions.clear()
