"""The load through Ray Serve (``arc-vllm serve --ray-replicas N``) beside plain
``arc-vllm serve``: affinity, prefix-cache reuse, throughput, latency, the Ray path's cost."""

from __future__ import annotations

import asyncio
from pathlib import Path

from arc_vllm.serving.local import Server
from bench.serving_bench.load import load


def ray_load(model, sessions: int, turns: int, replica_counts: str, out: Path) -> dict:
    """The load through Ray Serve (``arc-vllm serve --ray-replicas N``) beside plain
    ``arc-vllm serve``, same sessions and turns: affinity, prefix-cache reuse with
    session-affine and round-robin routing, throughput and latency."""
    rows = []
    options = ("--max-num-seqs", "32", "--max-model-len", "8192")
    direct = Server(str(model), out.with_suffix(".direct.log"), *options, in_process_engine=False).wait()
    try:
        rows.append({"setup": "arc-vllm serve", "replicas": 0, "routing": "-",
                     **asyncio.run(load(direct, sessions, turns, True, "direct"))})
    finally:
        direct.stop()
    for replicas in [int(n) for n in replica_counts.split(",") if n]:
        for routing in ("affinity",) + (("round-robin",) if replicas > 1 else ()):
            server = Server(str(model), out.with_suffix(f".ray{replicas}-{routing}.log"), *options,
                            "--ray-replicas", str(replicas), "--ray-routing", routing,
                            in_process_engine=False)
            try:
                server.wait(timeout=900)
                rows.append({"setup": "--ray-replicas", "replicas": replicas, "routing": routing,
                             **asyncio.run(load(server, sessions, turns, True,
                                                f"ray{replicas}{routing}"))})
            finally:
                server.stop()
    for row in rows:
        print(f"{row['setup']} {row['replicas']} {row['routing']}: {row['requests']} requests, "
              f"{row['errors']} errors, {row['requests_per_s']} req/s, p50 {row['p50_ms']} ms, "
              f"p99 {row['p99_ms']} ms, cached {row['cached_fraction']}, affinity {row['affinity']}, "
              f"{row['replicas_used']} replicas used")
    return {"rows": rows, "overhead_p50_ratio_ray1_to_direct":
            round(rows[1]["p50_ms"] / rows[0]["p50_ms"], 3) if len(rows) > 1 else None}
