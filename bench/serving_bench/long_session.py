"""One conversation resent whole to N steps on each API (``bench/serving.py --long-session N``,
1,600 by default; writes runs/bench/serving_long_session.json).

The client never compacts: it keeps every observation (real-format tool outputs of a
mini-swe-agent trajectory, ``compaction.observations``) and sends the whole history each step,
as Claude Code and Codex do, asking for one token. At 100, 400 and N steps: the request's
latency as the client sees it, ``arc_ms`` (ARC's own time on the request: taking the new
messages in, rendering, compacting), ``route_ms`` (the route's: parsing the body, the API's
translation into a chat body, finding the session), ``engine_ms`` and the body's bytes; each a
median of the 10 requests before the checkpoint. The targets (issue 37): ``arc_ms`` at N no
more than 2x that at 100, latency no more than 2.5x. At the end every observation sent is read
back by id, exactly.
"""

from __future__ import annotations

import json
import time

from bench.serving_bench.compaction import run_way

TARGETS = {"arc_ms": 2.0, "latency_ms": 2.5}


def long_session(base: str, model: str, steps: int, window: int) -> dict:
    checkpoints = sorted({100, 400, steps})
    results = {}
    for api in ("chat", "messages", "responses"):
        started = time.perf_counter()
        result = run_way(base, model, api, "resent", steps, checkpoints, window)
        first, last = result["checkpoints"][str(checkpoints[0])], result["checkpoints"][str(steps)]
        result["growth"] = {name: round(last[name] / first[name], 2) if first[name] else None
                            for name in ("latency_ms", "arc_ms", "route_ms", "engine_ms", "bytes_sent")}
        result["meets_targets"] = all(result["growth"][name] is not None and result["growth"][name] <= limit
                                      for name, limit in TARGETS.items())
        result["wall_s"] = round(time.perf_counter() - started, 1)
        results[api] = result
        print(f"{api}: {json.dumps(result)}", flush=True)
    return results
