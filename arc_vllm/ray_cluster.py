"""A local Ray cluster in a loopback-only network namespace, or a cluster you run.

Ray probes addresses outside the machine when it starts (a cloud-metadata address, a public
DNS server), so a local cluster only ever runs inside a network namespace that has nothing but
loopback: the command re-runs itself under ``unshare -n`` (``-r`` as well when not root) with
``lo`` up and Ray's usage stats off. ``ADDRESS`` (``ray://head:10001`` or ``head:6379``) joins a
cluster you run instead, on its network as you set it up; every node needs arc-vllm.

Used by ``bench ... --ray`` (``evaluation.ray_bench``) and ``serve --ray-replicas`` (``serving.ray.front``).
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


def isolated_command(command: list[str]) -> list[str]:
    """``command`` run in a new network namespace with loopback up."""
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        raise SystemExit("a local Ray cluster runs only in a loopback-only network namespace: "
                         "install util-linux (unshare) and iproute2 (ip), or give a cluster ADDRESS")
    namespace = ["unshare", "-n"] + ([] if os.geteuid() == 0 else ["-r"])
    return namespace + ["sh", "-c", 'ip link set lo up && exec "$@"', "sh", *command]


def isolated_environment() -> dict:
    return dict(os.environ, **ray_environment(), **{INSIDE: "1"})


def run_isolated(argv: list[str]) -> int | None:
    """Re-run ``arc-vllm ARGV`` in a loopback-only network namespace, once; returns its exit
    code, or None when this process already is that run."""
    if os.environ.get(INSIDE) == "1":
        return None
    return subprocess.call(isolated_command([sys.executable, "-m", "arc_vllm.cli", *argv]),
                           env=isolated_environment())


def kill_session(session_id: int) -> int:
    """SIGKILL every process of the session ``session_id`` except this one: a local cluster
    runs in a session of its own (its Ray processes lead their own process groups, so a
    process-group kill would miss them). Returns how many were killed."""
    import signal

    killed = 0
    for entry in os.listdir("/proc"):  # every process id (Linux has no call to list a session)
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            if os.getsid(int(entry)) == session_id:
                os.kill(int(entry), signal.SIGKILL)
                killed += 1
        except OSError:  # gone meanwhile
            continue
    return killed


def start(address: str, **options) -> None:
    import ray

    os.environ.update(ray_environment())
    if address == LOCAL:
        # The namespace has loopback only: the node's address is 127.0.0.1, whatever the
        # machine's hostname resolves to (Ray's fallback when it cannot probe outside).
        ray.init(include_dashboard=False, object_store_memory=200 * 2 ** 20, log_to_driver=False,
                 configure_logging=False, _node_ip_address="127.0.0.1", **options)
    else:
        ray.init(address=address, log_to_driver=False, **options)
