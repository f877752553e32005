"""One conversation resent whole to N steps on each API (``bench/serving.py --long-session N``,
1,600 by default; writes runs/bench/serving_long_session.json).

The client never compacts: it keeps every observation (real-format tool outputs of a
mini-swe-agent trajectory, ``compaction.observations``) and sends the whole history each step,
as Claude Code and Codex do, asking for one token. At 100, 400 and N steps: the request's
latency as the client sees it, ``arc_ms`` (ARC's own time on the request: taking the new
messages in, rendering, compacting), ``route_ms`` (the route's: parsing the body, the API's
translation into a chat body, finding the session), ``engine_ms`` and the body's bytes; each a
median of the 10 requests before the checkpoint. The targets (issue 37): ``arc_ms`` at N no
more than 2x that at 100, latency no more than 2.5x. Over a durable store (``--store redis``)
also ``store_ms``, the request's time on the store (its round trips), with the target (issue 46)
at N no more than 1.5x that at 100. At the end every observation sent is read
back by id, exactly.

Where the route's time goes (``route_parts``): the last step's body rebuilt here and the
route's walks over every message timed in this process (the best of 5): ``json.loads``, the
depth check, the adapter's ``declines`` and its compaction-handle scan (Messages: also
``take_compaction``); the rest of ``route_ms`` is the new part's fingerprints and translation
and the routing itself.
"""

from __future__ import annotations

import json
import time

from bench.serving_bench.compaction import Conversation, observations, run_way

TARGETS = {"arc_ms": 2.0, "latency_ms": 2.5}
STORE_TARGET = 1.5  # issue 46: the store's time per request at N steps against that at 100 (--store redis)


def long_session(base: str, model: str, steps: int, window: int, redis_port: int | None = None) -> dict:
    """``redis_port``: the session store's redis-server, whose bytes received per request each
    checkpoint reports (``probe_per_request``: what a request writes to the store)."""
    checkpoints = sorted({100, 400, steps})
    probe = None
    if redis_port is not None:
        import redis

        client = redis.Redis(port=redis_port)
        probe = lambda: int(client.info("stats")["total_net_input_bytes"])  # noqa: E731 - a counter read
    results = {}
    for api in ("chat", "messages", "responses"):
        started = time.perf_counter()
        result = run_way(base, model, api, "resent", steps, checkpoints, window, probe)
        first, last = result["checkpoints"][str(checkpoints[0])], result["checkpoints"][str(steps)]
        result["growth"] = {name: round(last[name] / first[name], 2) if first[name] else None
                            for name in ("latency_ms", "arc_ms", "route_ms", "engine_ms", "bytes_sent", "store_ms")}
        result["meets_targets"] = all(result["growth"][name] is not None and result["growth"][name] <= limit
                                      for name, limit in TARGETS.items())
        if first["store_ms"]:  # a durable store: its time per request must not grow with the session
            result["store_meets_target"] = result["growth"]["store_ms"] <= STORE_TARGET
        result["route_parts_ms"] = route_parts(api, "tiny", steps)
        result["wall_s"] = round(time.perf_counter() - started, 1)
        results[api] = result
        print(f"{api}: {json.dumps(result)}", flush=True)
    return results


def route_parts(api: str, model: str, steps: int) -> dict:
    """The route's walks over a whole resent body of ``steps`` steps, each the best of 5 (ms)."""
    from arc_vllm.serving.apis import json_body
    from arc_vllm.serving.compaction.handle import Handles
    from arc_vllm.serving.routes import adapters

    conversation = Conversation(api, "resent", model, observations())
    conversation.held = conversation.task()
    for index in range(steps):
        conversation.held += conversation.step_items(index)
    _, body = conversation.request()
    raw = json.dumps(body).encode()
    chat, others, _ = adapters()
    [adapter] = [one for one in (chat, *others) if one.name == api and not one.reads]

    def best(work) -> float:
        times = []
        for _ in range(5):
            started = time.perf_counter()
            work()
            times.append((time.perf_counter() - started) * 1000)
        return round(min(times), 2)

    parts = {"bytes": len(raw), "json_loads": best(lambda: json.loads(raw))}
    parts["depth_check"] = round(max(0.0, best(lambda: json_body(raw)) - parts["json_loads"]), 2)
    parts["declines"] = best(lambda: adapter.declines(body))
    parts["handle_scan"] = best(lambda: adapter.carries_handle(body))
    if api == "messages":
        from arc_vllm.serving.apis.messages_compaction import take_compaction

        handles = Handles(b"route parts: a secret of sixteen+")
        parts["take_compaction"] = best(lambda: take_compaction(body, handles))
    return parts
