"""One engine replica of ``arc-vllm serve --ray-replicas N``: a Ray Serve deployment replica
that runs ``arc-vllm serve`` (vLLM with ARC, the plugin path) as its child process, on a free
port of its node's address, and tells the front where that is (``address``).

Requests do not pass through the replica actor: the front asks Ray once per session which
replica serves it (Ray's router, session-affine) and then sends the session's requests to that
engine's HTTP port directly (``serving.ray.front``). Ray places the replicas, checks their
health and replaces a failed one. Every replica serves the same store (``--arc-store
redis://...``, or a folder with ``--arc-shared-sessions``), so any replica can take any session
over (``serving.sessions``: the storages).
ARC responses (JSON or server-sent events) carry ``arc.replica``, the replica's name, set by
the engine from ``ARC_VLLM_REPLICA``. ``check_health`` fails when the engine process is gone,
and Ray Serve replaces the replica. The child and each of its engine processes die with their
parent (``PR_SET_PDEATHSIG``, set for vLLM's own processes by the general plugin), so a replica
killed with SIGKILL leaves no engine behind.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from arc_vllm.serving.processes import DIE_WITH_PARENT, REPLICA, die_with_parent, free_port


class EngineReplica:
    def __init__(self, serve_arguments: list[str], log_dir: str, start_timeout_s: float = 900):
        import ray
        from ray import serve

        self.name = serve.get_replica_context().replica_id.unique_id
        # The node's address, so that a front on another node of a real cluster reaches it
        # (127.0.0.1 in the local cluster's loopback-only namespace).
        self.host = ray.util.get_node_ip_address()
        self.port = free_port(self.host)
        log = Path(log_dir) / f"replica-{self.name}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        command = [sys.executable, "-m", "arc_vllm.cli", "serve", *serve_arguments,
                   "--host", self.host, "--port", str(self.port)]
        with open(log, "w") as output:  # the child keeps its own copy of the descriptor
            self.process = subprocess.Popen(
                command, stdout=output, stderr=subprocess.STDOUT, preexec_fn=die_with_parent,
                env=dict(os.environ, **{DIE_WITH_PARENT: "1", REPLICA: self.name}))
        deadline = time.time() + start_timeout_s
        while not self.healthy():
            if self.process.poll() is not None or time.time() > deadline:
                raise RuntimeError(f"replica {self.name}: engine did not start: "
                                   f"{log.read_text()[-2000:]}")
            time.sleep(1)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def healthy(self) -> bool:
        try:
            urllib.request.urlopen(self.url + "/health", timeout=5)
            return True
        except OSError:
            return False

    async def address(self) -> tuple[str, str]:
        """(this replica's name, its engine's base URL): where the front sends a session."""
        return self.name, self.url

    def check_health(self) -> None:
        if self.process.poll() is not None or not self.healthy():
            raise RuntimeError(f"replica {self.name}: engine process is not serving")

    def __del__(self) -> None:
        process = getattr(self, "process", None)
        if process is not None and process.poll() is None:
            os.kill(process.pid, signal.SIGTERM)
