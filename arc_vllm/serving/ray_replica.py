"""One engine replica of ``arc-vllm serve --ray-replicas N``: a Ray Serve deployment replica
that runs ``arc-vllm serve`` (vLLM with ARC, the plugin path) as its child process on a private
loopback port, and forwards the requests Ray routes to it.

Every replica serves the same ``--arc-store-dir`` with ``--arc-shared-sessions``, so any replica
can take any session over (``serving.sessions``). ARC responses (JSON or server-sent events)
get ``arc.replica``: which replica served them. ``check_health`` fails when the engine process
is gone, and Ray Serve replaces the replica. The child and each of its engine processes die
with their parent (``PR_SET_PDEATHSIG``, set for vLLM's own processes by the general plugin),
so a replica killed with SIGKILL leaves no engine behind.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

PR_SET_PDEATHSIG = 1
# Set in the replica's engine: every vLLM process of it (the API server, EngineCore, workers;
# each loads the general plugin) dies with its parent, so a replica killed with SIGKILL takes
# its whole engine with it.
DIE_WITH_PARENT = "ARC_VLLM_DIE_WITH_PARENT"


def die_with_parent(signal_number: int = signal.SIGKILL) -> None:
    """Ask Linux to send ``signal_number`` to this process when its parent exits."""
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal_number)


def with_replica(content: bytes, content_type: str, replica: str) -> bytes:
    """``content`` with ``arc.replica`` set in its ARC object (a JSON body, or each SSE event)."""
    if "application/json" in content_type:
        try:
            body = json.loads(content)
        except ValueError:
            return content
        if isinstance(body, dict) and isinstance(body.get("arc"), dict):
            body["arc"]["replica"] = replica
            return json.dumps(body).encode()
        return content
    if "text/event-stream" in content_type:
        lines = []
        for line in content.decode().split("\n"):
            if line.startswith("data: {") and '"arc"' in line:
                event = json.loads(line[6:])
                if isinstance(event.get("arc"), dict):
                    event["arc"]["replica"] = replica
                    line = "data: " + json.dumps(event)
            lines.append(line)
        return "\n".join(lines).encode()
    return content


class EngineReplica:
    def __init__(self, serve_arguments: list[str], log_dir: str, start_timeout_s: float = 900):
        from ray import serve

        from arc_vllm.serving.local import free_port

        self.name = serve.get_replica_context().replica_id.unique_id
        self.port = free_port()
        log = Path(log_dir) / f"replica-{self.name}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        command = [sys.executable, "-m", "arc_vllm.cli", "serve", *serve_arguments,
                   "--host", "127.0.0.1", "--port", str(self.port)]
        self.process = subprocess.Popen(command, stdout=open(log, "w"), stderr=subprocess.STDOUT,
                                        preexec_fn=die_with_parent,
                                        env=dict(os.environ, **{DIE_WITH_PARENT: "1"}))
        deadline = time.time() + start_timeout_s
        while not self.healthy():
            if self.process.poll() is not None or time.time() > deadline:
                raise RuntimeError(f"replica {self.name}: engine did not start: "
                                   f"{log.read_text()[-2000:]}")
            time.sleep(1)
        import httpx

        self.client = httpx.AsyncClient(base_url=f"http://127.0.0.1:{self.port}", timeout=None)

    def healthy(self) -> bool:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=5)
            return True
        except OSError:
            return False

    async def forward(self, method: str, path: str, query: str, headers: dict, body: bytes):
        """The request on this replica's engine, streamed (called with ``stream=True``): first
        (status, content type), then the body as it comes; server-sent events one by one, as
        the engine sends them, each with ``arc.replica`` where it carries the ``arc`` object."""
        request = self.client.build_request(method, path + (f"?{query}" if query else ""),
                                            headers=headers, content=body)
        response = await self.client.send(request, stream=True)
        try:
            kind = response.headers.get("content-type", "")
            yield response.status_code, kind
            if "text/event-stream" not in kind:
                yield with_replica(await response.aread(), kind, self.name)
                return
            pending = b""
            async for piece in response.aiter_raw():
                *events, pending = (pending + piece).split(b"\n\n")
                for event in events:
                    yield with_replica(event + b"\n\n", kind, self.name)
            if pending:
                yield with_replica(pending, kind, self.name)
        finally:
            await response.aclose()

    def check_health(self) -> None:
        if self.process.poll() is not None or not self.healthy():
            raise RuntimeError(f"replica {self.name}: engine process is not serving")

    def __del__(self) -> None:
        process = getattr(self, "process", None)
        if process is not None and process.poll() is None:
            os.kill(process.pid, signal.SIGTERM)
