"""The API server's half of KV reuse: before a compacted view goes to the engine, send its
warm-up stages (planned by ``kv/warmup.py``, which says why) as one-token requests of the
session, one stage after the other.

Used by ``serving/step/chat.py`` when the server runs with ``--arc-kv-reuse``; the planner reads
the block size, ``min_run`` and the recomputation from the engine's config (``WarmupPlanner.of_vllm``).
"""

from __future__ import annotations

import asyncio
import uuid

from arc_vllm.kv.warmup import Stage, WarmupPlanner


class KVWarmup:
    def __init__(self, engine_client, counter, recompute_tokens: int | None = None):
        self.engine_client = engine_client
        self.counter = counter
        self.planner = WarmupPlanner.of_vllm(engine_client.vllm_config, recompute_tokens)

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
