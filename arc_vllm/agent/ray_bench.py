"""Benchmark episodes as Ray tasks: ``arc-vllm bench niah|longbench --ray [ADDRESS]``.

Each attempt runs as one Ray task; results come back to the driver, which alone appends them
to DIR/results.jsonl as they finish (``agent.bench``): no duplicates, and a rerun skips what is
there. A task whose worker dies is retried by Ray (``max_retries``); an attempt that still
fails to come back is reported, not written, so the next run does it.

``--ray`` alone starts a local cluster. Ray probes addresses outside the machine when it starts,
so a local cluster only ever runs inside a network namespace that has nothing but loopback:
the command re-executes itself under ``unshare -n`` (``-r`` too when not root) with ``lo`` up
and ``RAY_USAGE_STATS_ENABLED=0``. ``--ray ADDRESS`` (``ray://host:10001`` or ``host:6379``)
joins a cluster you run, with its network as you set it up; every node needs arc-vllm.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

LOCAL = "local"
INSIDE = "ARC_VLLM_LOOPBACK_ONLY"  # set inside the namespace (no second re-exec)


def ray_environment() -> dict:
    return {"RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled",
            "RAY_DISABLE_DOCKER_CPU_WARNING": "1"}


def run_isolated(argv: list[str]) -> int | None:
    """Re-run ``arc-vllm ARGV`` in a loopback-only network namespace, once; returns its exit
    code, or None when this process already is that run."""
    if os.environ.get(INSIDE) == "1":
        return None
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        raise SystemExit("--ray: a local Ray cluster runs only in a loopback-only network namespace; "
                         "install util-linux (unshare) and iproute2 (ip), or pass --ray ADDRESS")
    namespace = ["unshare", "-n"] + ([] if os.geteuid() == 0 else ["-r"])
    command = namespace + ["sh", "-c", 'ip link set lo up && exec "$@"', "sh",
                           sys.executable, "-m", "arc_vllm.cli", *argv]
    env = dict(os.environ, **ray_environment(), **{INSIDE: "1"})
    return subprocess.call(command, env=env)


def start(address: str) -> None:
    import ray

    os.environ.update(ray_environment())
    if address == LOCAL:
        ray.init(include_dashboard=False, object_store_memory=200 * 2 ** 20,
                 log_to_driver=False, configure_logging=False)
    else:
        ray.init(address=address, log_to_driver=False)


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
            print(f"not done (rerun to complete): {method} {setting.label} seed {seed} task {index}: "
                  f"{reason}", file=sys.stderr)
    finally:
        ray.shutdown()
