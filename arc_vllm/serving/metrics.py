"""ARC's Prometheus metrics, exported on vLLM's own /metrics beside vLLM's counters.

    arc_requests_total{api}          ARC requests served, by API (chat, messages, responses)
    arc_compactions_total{api}       compactions run for ARC sessions
    arc_recalls_total{result,api}    ARC commands served in the server (ok / refused)
    arc_view_tokens                  histogram of the bounded views sent to the engine
    arc_prompt_tokens_total{api}     prompt tokens of ARC requests, as the engine counted them
    arc_prefix_cached_tokens_total{api}  of those, tokens served from vLLM's prefix cache
    arc_handoffs_total{api,kind}     compactions a client or a provider's API asked for, answered
                                     from the store with no model call (turn, trigger, threshold)
    arc_store_bytes                  payload bytes held by all session stores in memory
    arc_store_kept_bytes             what the durable store keeps: a folder's size on disk (taken
                                     at each retention pass); Redis: the observations' bytes
                                     (after each commit)
    arc_store_round_trip_seconds{op} histogram of the session store's round trips (Redis: lease,
                                     load, commit, index, ...; its _count / requests: trips per request)
    arc_store_errors_total{op}       round trips the session store did not answer or refused (each a 503)
    arc_sessions                     sessions in memory
    arc_sessions_unloaded_total{reason}  sessions taken out of memory (ttl, capacity, retention): unloaded
                                     to their store folder, or ended without one

The engine-side figures (``arc_engine_*``) come from ``serving.scheduler``, and with
``--arc-kv-reuse`` ``arc_engine_kv_reused_tokens_total`` and ``arc_kv_reuse_enabled`` from the
connector. ``docs/grafana/arc-vllm.json`` is a Grafana dashboard of them beside vLLM's.
A leaf module: everything in ``serving/`` may import it (the API names are its labels).
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

# The APIs ARC serves, by the name the records, the metrics and the session keys give them.
CHAT, MESSAGES, RESPONSES = "chat", "messages", "responses"
APIS = (CHAT, MESSAGES, RESPONSES)
REQUESTS = Counter("arc_requests", "ARC requests served, by API", ["api"])
COMPACTIONS = Counter("arc_compactions", "Compactions run for ARC sessions", ["api"])
RECALLS = Counter("arc_recalls", "ARC commands served inside the server", ["result", "api"])
VIEW_TOKENS = Histogram("arc_view_tokens", "Tokens of each bounded view sent to the engine",
                        buckets=(256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072))
PROMPT_TOKENS = Counter("arc_prompt_tokens", "Prompt tokens of ARC requests (engine count)", ["api"])
PREFIX_CACHED_TOKENS = Counter("arc_prefix_cached_tokens",
                               "Prompt tokens of ARC requests served from the prefix cache", ["api"])
# What compactions cost the prefix cache: the tokens they freed, and those they left the engine to
# prefill anew (from a compacted view's first token that differs from the last view's).
COMPACTION_FREED_TOKENS = Counter("arc_compaction_freed_tokens", "Tokens ARC's compactions freed", ["api"])
COMPACTION_UNCACHED_TOKENS = Counter("arc_compaction_uncached_tokens", "Tokens ARC's compactions left "
                                     "to prefill anew (from the first token that differs from the last view)", ["api"])
HANDOFFS = Counter("arc_handoffs", "Compactions a client or a provider's API asked for, answered by ARC "
                   "from its store with no model call", ["api", "kind"])
for _api in APIS:  # every series present on /metrics from the start, at 0
    for _kind in ("turn", "trigger", "threshold"):
        HANDOFFS.labels(api=_api, kind=_kind)
    for _counter in (REQUESTS, COMPACTIONS, PROMPT_TOKENS, PREFIX_CACHED_TOKENS, COMPACTION_FREED_TOKENS,
                     COMPACTION_UNCACHED_TOKENS):
        _counter.labels(api=_api)
    for _result in ("ok", "refused"):
        RECALLS.labels(result=_result, api=_api)
# "livemax": one value per live API-server process under prometheus_client's multiprocess mode.
STORE_BYTES = Gauge("arc_store_bytes", "Payload bytes held by all ARC session stores",
                    multiprocess_mode="livemax")
SESSIONS = Gauge("arc_sessions", "ARC sessions in memory", multiprocess_mode="livemax")
STORE_KEPT_BYTES = Gauge("arc_store_kept_bytes", "Bytes the ARC session store keeps (a folder on disk; "
                         "Redis: the observations)", multiprocess_mode="livemax")
STORE_OPS = ("lease", "load", "commit", "release", "index", "exists", "ended", "listing", "remove", "expire", "secret")
STORE_ROUND_TRIP = Histogram("arc_store_round_trip_seconds", "Round trips to the ARC session store (Redis)", ["op"],
                             buckets=(0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 2.5))
STORE_ERRORS = Counter("arc_store_errors", "Round trips the ARC session store did not answer or refused", ["op"])
for _op in STORE_OPS:
    STORE_ROUND_TRIP.labels(op=_op)
    STORE_ERRORS.labels(op=_op)
UNLOADED = Counter("arc_sessions_unloaded", "ARC sessions taken out of memory (idle TTL, the "
                   "--arc-max-sessions cap): unloaded to their store folder, or ended", ["reason"])
for _reason in ("ttl", "capacity", "retention"):
    UNLOADED.labels(reason=_reason)


def refresh(manager) -> None:
    SESSIONS.set(len(manager.sessions))
    STORE_BYTES.set(sum(session.store.num_payload_bytes for session in manager.sessions.values()))
    STORE_KEPT_BYTES.set(manager.store_bytes)
