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

``RedisServer`` starts a real ``redis-server`` (Debian's) the same way, for a session store
(``--arc-store``) in tests and benchmarks: 127.0.0.1 and a unix socket in its own folder (the
socket reaches into a network namespace, where Ray replicas run), durable as docs/serving.md
recommends (``appendonly yes``, ``appendfsync always``), so a restart keeps every acknowledged
write.

    redis = RedisServer(Path("redis")).start()
    server = Server(model_dir, Path("server.log"), "--arc-store", redis.url()).wait()
    redis.stop(); redis.start()     # a restart: the append-only file is read back
"""

import os
import shutil
import signal
import socket
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
            if self.healthy():
                return self
            time.sleep(1)
        self.stop()
        raise TimeoutError(f"server not healthy in {timeout}s: {self.log.read_text()[-3000:]}")

    def healthy(self, timeout: float = 2) -> bool:
        """Whether /health answers now (``wait`` polls it; a caller that must not block asks)."""
        try:
            urllib.request.urlopen(self.base + "/health", timeout=timeout)
            return True
        except OSError:
            return False

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


MISSING = ("redis-server is not installed: a Redis session store (the tests', the benchmarks') runs a real "
           "one. Install it with `apt-get install redis-server redis-tools` (scripts/setup.sh does, as root)")


class RedisServer:
    def __init__(self, folder: Path, port: int | None = None):
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError(MISSING)
        self.binary, self.folder = binary, Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.port = port or free_port()
        self.socket = self.folder / "redis.sock"
        self.process: subprocess.Popen | None = None

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    def socket_url(self, db: int = 0) -> str:
        return f"unix://{self.socket}?db={db}"

    def start(self) -> "RedisServer":
        self.process = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.folder),
             "--unixsocket", str(self.socket), "--unixsocketperm", "700", "--appendonly", "yes",
             "--appendfsync", "always", "--save", "", "--daemonize", "no", "--protected-mode", "no"],
            stdout=open(self.folder / "redis.log", "ab"), stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"redis-server exited: {(self.folder / 'redis.log').read_text()[-2000:]}")
            if self.ping():
                return self
            time.sleep(0.05)
        raise RuntimeError("redis-server did not answer within 20 s")

    def ping(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as connection:
                connection.sendall(b"PING\r\n")
                return connection.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def stop(self) -> None:
        """Stopped (SIGTERM: what it acknowledged is in its append-only file)."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=20)
        self.process = None

    def command(self, *args: str) -> str:
        """A command through redis-cli (``redis-tools``), its output."""
        cli = shutil.which("redis-cli")
        if cli is None:
            raise RuntimeError(MISSING.replace("redis-server", "redis-cli (redis-tools)"))
        return subprocess.run([cli, "-p", str(self.port), *args], capture_output=True, text=True,
                              check=True).stdout
