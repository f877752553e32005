"""The engine-side hook: a vLLM Scheduler that measures what prefix-stable views save.

Registered by ``arc-vllm serve`` as ``--scheduler-cls arc_vllm.serving.scheduler.ArcScheduler``
(pass your own ``--scheduler-cls`` to replace it). It runs in vLLM's engine core. When an ARC
request (one whose ``sampling_params.extra_args`` hold ``arc_session``) is first scheduled,
its computed-token count is exactly what vLLM's prefix cache supplied, so the hook records,
per request, the prompt tokens and the cached ones, and per session the compaction events
the API server passed along (``arc_compactions``). The figures go to Prometheus
(``arc_engine_prompt_tokens_total``, ``arc_engine_prefix_cached_tokens_total``,
``arc_engine_requests_total``, ``arc_engine_compactions_total``), which reach vLLM's /metrics
through prometheus_client's multiprocess directory (set up by the launcher). With
``--arc-kv-reuse``, tokens whose KV the connector supplied are not counted as prefix-cached;
the connector reports them itself (``arc_engine_kv_reused_tokens_total``, through vLLM's
connector stats) and says whether reuse passed its start-up check (``arc_kv_reuse_enabled``).

Only the scheduler side of vLLM is touched: ``schedule()`` is wrapped. It reads what the
KV-reuse connector supplied for each new request (``supplied_tokens``), so that those tokens
are not counted as prefix-cached; the connector's own state is its own (it drains it when a
request finishes).
"""

from __future__ import annotations

from prometheus_client import Counter
from vllm.v1.core.sched.scheduler import Scheduler

from arc_vllm.kv.extra_args import ArcExtraArgs

ENGINE_PROMPT_TOKENS = Counter("arc_engine_prompt_tokens",
                               "Prompt tokens of ARC requests, seen by the scheduler")
ENGINE_CACHED_TOKENS = Counter("arc_engine_prefix_cached_tokens",
                               "Prompt tokens of ARC requests supplied by the prefix cache")
ENGINE_REQUESTS = Counter("arc_engine_requests", "ARC requests scheduled")
ENGINE_COMPACTIONS = Counter("arc_engine_compactions",
                             "Compactions reported with ARC requests, per engine request")


class ArcScheduler(Scheduler):
    def schedule(self, *args, **kwargs):
        output = super().schedule(*args, **kwargs)
        # What the KV-reuse connector (kv/connector.py) supplied for a request.
        supplied = getattr(self.connector, "supplied_tokens", None)
        for new in output.scheduled_new_reqs:
            extra = ArcExtraArgs.of_request(new)
            if extra.session is None:
                continue
            prompt = len(new.prompt_token_ids or [])
            reused = supplied(new.req_id) if supplied is not None else 0
            cached = min(new.num_computed_tokens, prompt) - reused
            ENGINE_REQUESTS.inc()
            ENGINE_PROMPT_TOKENS.inc(prompt)
            ENGINE_CACHED_TOKENS.inc(cached)
            ENGINE_COMPACTIONS.inc(extra.compactions)
        return output
