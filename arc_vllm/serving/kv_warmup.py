"""The API server's half of KV reuse: send a compacted view in warm-up stages, so the connector's claims start where reusable runs start.

A compaction rewrites what follows the task prefix F (the summary S, the catalog page) and
keeps recent turns that the engine computed in the session's last view, further along, with
new text (stubs, the new turn) between them. vLLM lets a KV connector claim only the run right
after the prefix-cache hit, which here is new text. So, when the session's last view holds long
runs of this view past the hit, the server cuts the view into stages
(``kv/spans.py`` ``warmup_boundaries``) and sends each stage's tokens first as a
one-token request of the session marked ``arc_kv_save: false``: the connector
(``serving/kv_connector.py``) claims the run at the stage's start, the engine computes the new
text up to the next block boundary inside the next run, and those blocks join the prefix
cache. The real request is the last stage. ``recompute_tokens`` makes every claimed run start
that many tokens in, so its first tokens are computed, seeing the new text before them
(CacheBlend's selective recomputation).

Used by ``serving/chat.py`` when the server runs with ``--arc-kv-reuse``.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import OrderedDict

from arc_vllm.kv import MIN_RUN
from arc_vllm.kv.spans import warmup_boundaries

MAX_SESSIONS = 1024  # last views kept in this process; the least recently used goes first


class KVWarmup:
    def __init__(self, engine_client, counter, block_size: int, recompute_tokens: int = 0,
                 min_run: int = MIN_RUN):
        self.engine_client = engine_client
        self.counter = counter
        self.block_size = block_size
        self.recompute_tokens = recompute_tokens
        self.min_run = min_run
        self.last_views: OrderedDict[str, list[int]] = OrderedDict()

    def plan(self, previous: list[int] | None, messages: list[dict], tools) -> tuple[list[int], list[int]]:
        tokens = self.counter.prompt_token_ids(messages, tools)
        return tokens, warmup_boundaries(previous, tokens, self.block_size, self.min_run,
                                         self.recompute_tokens)

    async def before(self, session_id: str, messages: list[dict], tools) -> int:
        """Send this view's warm-up stages, if any; returns the tokens of the longest (0: none)."""
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        previous = self.last_views.pop(session_id, None)
        # Tokenizing and planning are linear in the view (long for 100k tokens): off the event loop.
        tokens, boundaries = await asyncio.to_thread(self.plan, previous, messages, tools)
        self.last_views[session_id] = tokens
        while len(self.last_views) > MAX_SESSIONS:
            self.last_views.popitem(last=False)
        params = SamplingParams(max_tokens=1, extra_args={
            "arc_session": session_id, "arc_kv_save": False, "arc_kv_recompute": self.recompute_tokens})
        for boundary in boundaries:  # one after the other: each needs the last one's blocks cached
            async for _ in self.engine_client.generate(TokensPrompt(prompt_token_ids=tokens[:boundary]),
                                                       params, f"arc-warmup-{uuid.uuid4().hex}"):
                pass
        return boundaries[-1] if boundaries else 0
