"""Benchmark episodes as Ray tasks: ``arc-vllm bench niah|longbench --ray [ADDRESS]``.

Each attempt runs as one Ray task; results come back to the driver, which alone appends them
to DIR/results.jsonl as they finish (``evaluation.bench``): no duplicates, and a rerun skips what is
there. A task whose worker dies is retried by Ray (``max_retries``); an attempt that still
fails to come back is reported, not written, so the next run does it.

``--ray`` alone starts a local cluster, only ever inside a loopback-only network namespace;
``--ray ADDRESS`` joins a cluster you run (``arc_vllm.ray_cluster``).
"""

from __future__ import annotations

import logging

from arc_vllm.ray_cluster import start

logger = logging.getLogger(__name__)


def results(attempt, plan: list[tuple], address: str, max_retries: int = 3):
    """Yield each finished attempt's record, in the order they finish; report the lost."""
    import ray

    start(address)
    try:
        task = ray.remote(num_cpus=1, max_retries=max_retries)(attempt)
        pending = {task.remote(*item): item for item in plan}
        lost = []
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            for reference in done:
                item = pending.pop(reference)
                try:
                    yield ray.get(reference)
                except (ray.exceptions.RayError, OSError) as error:
                    lost.append((item, f"{type(error).__name__}: {str(error)[:200]}"))
        for item, reason in lost:
            method, setting, seed, index = item
            logger.warning("not done (rerun to complete): %s %s seed %s task %s: %s", method, setting.label,
                           seed, index, reason)
    finally:
        ray.shutdown()
