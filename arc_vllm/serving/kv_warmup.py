"""The API server's half of KV reuse: before a compacted view goes to the engine, send its
warm-up stages (planned by ``kv/warmup.py``, which says why) as one-token requests of the
session, one stage after the other.

Used by ``serving/chat.py`` when the server runs with ``--arc-kv-reuse``; the planner reads
``min_run`` from the engine's own connector config (``KVReuseConfig.of_vllm``).
"""

from __future__ import annotations

import asyncio
import logging
import uuid

from arc_vllm.kv.config import KVReuseConfig, default_recompute_tokens
from arc_vllm.kv.warmup import Stage, WarmupPlanner

logger = logging.getLogger(__name__)


class KVWarmup:
    def __init__(self, engine_client, counter, recompute_tokens: int | None = None):
        self.engine_client = engine_client
        self.counter = counter
        vllm_config = engine_client.vllm_config
        dtype = str(vllm_config.model_config.dtype).removeprefix("torch.")
        chosen = "given" if recompute_tokens is not None else f"the default for {dtype}"
        if recompute_tokens is None:  # the default for the engine's dtype (kv/config.py)
            recompute_tokens = default_recompute_tokens(dtype)
        logger.info("KV reuse: the first %d tokens of each reused run are recomputed (%s)",
                    recompute_tokens, chosen)
        self.planner = WarmupPlanner(vllm_config.cache_config.block_size, KVReuseConfig.of_vllm(vllm_config),
                                     recompute_tokens)

    @property
    def recompute_tokens(self) -> int:
        return self.planner.recompute_tokens

    async def _generate(self, stage: Stage) -> None:
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        params = SamplingParams(max_tokens=1, extra_args=stage.extra_args)
        async for _ in self.engine_client.generate(TokensPrompt(prompt_token_ids=stage.prompt), params,
                                                   f"arc-warmup-{uuid.uuid4().hex}"):
            pass

    async def before(self, session_id: str, messages: list[dict], tools) -> int:
        """Send this view's warm-up stages, if any; returns the tokens of the longest (0: none)."""
        loop = asyncio.get_running_loop()

        def send(batch: list[Stage]) -> list[None]:  # from the planner's thread, onto this loop
            return [asyncio.run_coroutine_threadsafe(self._generate(stage), loop).result()
                    for stage in batch]

        def plan_and_send() -> list:
            # Tokenizing and planning are linear in the view (long for 100k tokens): off the loop.
            tokens = self.counter.prompt_token_ids(messages, tools)
            return self.planner.warm_up([(session_id, tokens)], send)

        sent = await asyncio.to_thread(plan_and_send)
        return max((len(stage.prompt) for stage, _ in sent), default=0)
