"""Start and stop a real ``arc-vllm serve`` on 127.0.0.1 as a subprocess: a free port, a log
file, a bounded wait for /health, and the whole process group stopped afterwards (``kill()``
is the kill -9 a durable store must survive). Public, like vLLM's own test server helper:
this project's tests and benchmarks use it, and so can a user's own tests of an agent
against ARC. It needs only the installed ``arc-vllm`` command, not a source checkout.

    server = Server(model_dir, Path("server.log"), "--arc-store-dir", "sessions").wait()
    ...
    server.stop()

``vllm_entry=True`` starts vLLM's own server module instead (``python -m
vllm.entrypoints.launchers.api_server.entry --model MODEL ...``): with ``--arc`` among the extra
arguments it is ARC through the plugin, without it plain vLLM.
"""

import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from arc_vllm.offline import go_offline
from arc_vllm.offline import in_process_engine as start_in_process
from arc_vllm.serving.processes import free_port


class Server:
    def __init__(self, model: str, log: Path, *extra: str, port: int | None = None,
                 in_process_engine: bool = True, max_model_len: int = 4096,
                 env: dict | None = None, vllm_entry: bool = False):
        self.port = port or free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log = log
        extra_env = env or {}
        env = go_offline(dict(os.environ, VLLM_CPU_KVCACHE_SPACE="1"))
        env.pop("VLLM_ENABLE_V1_MULTIPROCESSING", None)  # the child's own choice, below
        if in_process_engine:  # faster start, fewer processes (tests)
            start_in_process(env)
        env.pop("TRITON_INTERPRET", None)
        env.update(extra_env)
        if vllm_entry:
            launcher = [sys.executable, "-m", "vllm.entrypoints.launchers.api_server.entry",
                        "--model", model]
        else:
            launcher = [str(Path(sys.executable).parent / "arc-vllm"), "serve", model]
        command = [*launcher, "--host", "127.0.0.1", "--port", str(self.port), "--enforce-eager",
                   "--max-model-len", str(max_model_len), "--max-num-seqs", "16", *extra]
        self.process = subprocess.Popen(command, stdout=open(log, "w"), stderr=subprocess.STDOUT,
                                        env=env, start_new_session=True)

    def wait(self, timeout: float = 240) -> "Server":
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"server exited: {self.log.read_text()[-3000:]}")
            try:
                urllib.request.urlopen(self.base + "/health", timeout=2)
                return self
            except OSError:
                time.sleep(1)
        self.stop()
        raise TimeoutError(f"server not healthy in {timeout}s: {self.log.read_text()[-3000:]}")

    def kill(self) -> None:
        """kill -9 of the whole process group: the crash the durable store must survive."""
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()
