"""Servers the tests share (one per pytest session, started when first asked for): ARC on the
tiny random-weight model and plain vLLM beside it, both with the embedded model's tool-calling
template, so a test can compare what ARC does with what vLLM does without it; and ARC on the
tiny reasoning models (``arc_vllm/reasoning_model.py``): Qwen3's tokenizer and template with
vLLM's ``qwen3`` reasoning parser ("reasoning"), DeepSeek-R1's with ``deepseek_r1`` ("r1"), both
with the ``hermes`` tool parser and a 32k window, whose outputs a test forces token by token
(``tests/helpers/short_answers.py``). Also the servers of one module each (kill -9's, the
session caps', the plugin's, KV reuse's, the CLIs' 32k one), so that they start ahead too.

    from tests.helpers.servers import shared
    server = shared("arc")        # or any kind of KINDS; stopped when the pytest session ends

A test run starts a kind up to 40 tests before the first that needs it, while fewer than three
run and it fits in memory (``launch``: its start-up, tens of seconds, overlaps those tests), and
stops it after the last (``stop``), or earlier to make room for a test's own processes, so the
run holds only the servers in use (``tests/helpers/server_plan.py``). A test holds a
``Handle``, which reaches the server of its kind as it runs now, started again if it was
stopped for room.
"""

from __future__ import annotations

import atexit
import tempfile
from pathlib import Path

from arc_vllm import reasoning_model
from arc_vllm.model_prep import TOOLS_TEMPLATE, default_model_dir, prepare_tiny
from arc_vllm.serving.local import Server
from tests.helpers.processes import check_machine_class, on_python_path

REPO = Path(__file__).resolve().parents[2]
SHORT_ANSWERS = ("--logits-processors", "tests.helpers.short_answers:ShortAnswers")  # the repository on PYTHONPATH
# vLLM keeps Responses API responses only with this (GET /v1/responses/{id}); off by default.
STORE = {"VLLM_ENABLE_RESPONSES_API_STORE": "1"}
KINDS = {
    "arc": dict(extra=("--arc-ui",), vllm_entry=False),  # the inspector's page too
    # Two tenants' keys and the operator's, sessions in a store folder (``--arc-store-dir``).
    "keyed": dict(extra=("--api-key", "key-a", "key-b", "ops", "--arc-admin-key", "ops",
                         "--arc-store-dir", "{folder}/sessions", "--arc-ui"), vllm_entry=False),
    # Behind a gateway that names callers in X-Caller (and holds the key "gw"); no --arc-ui.
    "gateway": dict(extra=("--api-key", "gw", "ops", "--arc-admin-key", "ops",
                           "--arc-caller-header", "X-Caller"), vllm_entry=False),
    "plain": dict(extra=("--chat-template", str(TOOLS_TEMPLATE), "--enable-auto-tool-choice",
                         "--tool-call-parser", "hermes", "--enable-prompt-tokens-details"), vllm_entry=True),
    # Reasoning models as a user serves them: Claude Code's first request (~10k tokens) fits.
    "reasoning": dict(extra=("--reasoning-parser", "qwen3", "--enable-auto-tool-choice", "--tool-call-parser", "hermes",
                             *SHORT_ANSWERS),
                      vllm_entry=False, model=lambda: reasoning_model.prepare("qwen3"), max_model_len=32768,
                      env={"PYTHONPATH": on_python_path(str(REPO))}),
    # The embedded model (SmolLM2) for the real clients and the tests that need a model that
    # answers: float32, a 16k window (sessions may ask for a smaller one); it holds about 7 GB, its
    # engine 5.6 GB from its start (``gb``: what the run's memory plan counts it as).
    "smol": dict(extra=("--dtype", "float32"), vllm_entry=False, model=lambda: default_model_dir(require=True), gb=7,
                 max_model_len=16384, env={"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1", "VLLM_CPU_KVCACHE_SPACE": "4"}),
    "r1": dict(extra=("--reasoning-parser", "deepseek_r1", "--enable-auto-tool-choice", "--tool-call-parser", "hermes",
                      *SHORT_ANSWERS),
               vllm_entry=False, model=lambda: reasoning_model.prepare("r1"), max_model_len=32768,
               env={"PYTHONPATH": on_python_path(str(REPO))}),
    # Servers of one module each, started ahead like the others (their start-ups overlap earlier
    # tests): a store folder to kill -9 and restart on (test_serving.py), the session cap with
    # and without one, vLLM's own module with --arc (test_plugin.py), KV reuse with its engine
    # in processes of its own (test_kv_reuse.py), a 32k window for the CLIs' grown first
    # requests (test_agent_clis.py).
    "durable": dict(extra=("--arc-store-dir", "{folder}/sessions"), vllm_entry=False),
    "capped": dict(extra=("--arc-max-sessions", "20"), vllm_entry=False),
    "capped_durable": dict(extra=("--arc-max-sessions", "20", "--arc-store-dir", "{folder}/sessions"),
                           vllm_entry=False),
    "plugin_arc": dict(extra=("--arc", "--chat-template", str(TOOLS_TEMPLATE)), vllm_entry=True,
                       env={"PROMETHEUS_MULTIPROC_DIR": "{folder}/prometheus"}),
    # Compactions keep three quarters of H's cap: the default keeps half, which at this window
    # leaves only the newest log, and kept turns are what the connector has to claim.
    "kv_reuse": dict(extra=("--arc-kv-reuse", "--arc-recent-kept-percent", "75"), vllm_entry=False,
                     in_process_engine=False, env={"PROMETHEUS_MULTIPROC_DIR": "{folder}/prometheus"}),
    "wide": dict(extra=("--served-model-name", "smol", *SHORT_ANSWERS), vllm_entry=False, max_model_len=32768,
                 env={"PYTHONPATH": on_python_path(str(REPO))}),
}
_started: dict[str, Server] = {}
_ready: set[str] = set()
_folder: list[Path] = []  # this run's folder of server folders, made at the first start


def folder() -> Path | None:
    """The folder of this run's server folders (their logs, stores, Prometheus files), if any
    started: removed when the run passes, kept and named when it fails (``tests/conftest.py``)."""
    return _folder[0] if _folder else None


def launch(kind: str) -> None:
    """Start the ``kind`` server without waiting for it (``shared`` waits): a test run starts
    the servers its next tests need while the current ones run (``tests/conftest.py``)."""
    if kind not in _started:
        spec = KINDS[kind]
        if not _folder:
            _folder.append(Path(tempfile.mkdtemp(prefix="arc-test-servers-")))
        folder = Path(tempfile.mkdtemp(prefix=f"{kind}-", dir=_folder[0]))
        (folder / "prometheus").mkdir()
        extra = [argument.format(folder=folder) for argument in spec["extra"]]
        env = {name: value.format(folder=folder) for name, value in {**STORE, **spec.get("env", {})}.items()}
        model = spec.get("model", prepare_tiny)()
        _started[kind] = Server(str(model), folder / "server.log", *extra, vllm_entry=spec["vllm_entry"],
                                max_model_len=spec.get("max_model_len", 4096), env=env,
                                in_process_engine=spec.get("in_process_engine", True))


def running() -> list[str]:
    """The kinds of the servers this run holds now (started, ready or not)."""
    return list(_started)


def starting() -> list[str]:
    """The kinds of the servers whose start-up is under way: started, not yet healthy."""
    for kind in _started.keys() - _ready:
        if _started[kind].healthy(timeout=0.2):
            _became_ready(kind)
    return [kind for kind in _started if kind not in _ready]


def shared(kind: str) -> Server:
    """The ``kind`` server (the tiny model's: 4,096 tokens), started on first use, healthy. Its
    folder (``server.log.parent``) holds what ``{folder}`` names in its arguments."""
    launch(kind)
    if kind not in _ready:
        _started[kind].wait()
        _became_ready(kind)
    return _started[kind]


def _became_ready(kind: str) -> None:
    server = _started[kind]
    check_machine_class(server.process.pid, server.log)  # its engines are this run's class
    _ready.add(kind)


class Handle:
    """What a ``<kind>_server`` fixture gives a test: the ``kind`` server as it runs now (its
    ``base``, ``log``, ``kill`` ...), started again, on a new port and folder, where the run
    stopped it to make room since the fixture was first asked for."""

    def __init__(self, kind: str):
        self.kind = kind

    def __getattr__(self, name: str):
        return getattr(shared(self.kind), name)


def stop(kind: str) -> None:
    """Stop the ``kind`` server, if it runs (once its last test is done, or at the end)."""
    _ready.discard(kind)
    server = _started.pop(kind, None)
    if server is not None:
        server.stop()


def stop_all() -> None:
    for kind in list(_started):
        stop(kind)


atexit.register(stop_all)  # also when pytest is interrupted
