"""Servers the tests share (one per pytest session, started when first asked for): ARC on the
tiny random-weight model and plain vLLM beside it, both with the embedded model's tool-calling
template, so a test can compare what ARC does with what vLLM does without it; and ARC on the
tiny reasoning models (``arc_vllm/reasoning_model.py``): Qwen3's tokenizer and template with
vLLM's ``qwen3`` reasoning parser ("reasoning"), DeepSeek-R1's with ``deepseek_r1`` ("r1"), both
with the ``hermes`` tool parser and a 32k window, whose outputs a test forces token by token
(``tests/helpers/short_answers.py``).

    from tests.helpers.servers import shared
    server = shared("arc")        # or "plain", "reasoning", "r1"; stopped when the pytest session ends
"""

from __future__ import annotations

import atexit
import tempfile
from pathlib import Path

from arc_vllm import reasoning_model
from arc_vllm.model_prep import TOOLS_TEMPLATE, prepare_tiny
from arc_vllm.serving.local import Server

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
                      env={"PYTHONPATH": str(REPO)}),
    "r1": dict(extra=("--reasoning-parser", "deepseek_r1", "--enable-auto-tool-choice", "--tool-call-parser", "hermes",
                      *SHORT_ANSWERS),
               vllm_entry=False, model=lambda: reasoning_model.prepare("r1"), max_model_len=32768,
               env={"PYTHONPATH": str(REPO)}),
}
_started: dict[str, Server] = {}


def shared(kind: str) -> Server:
    """The ``kind`` server (the tiny model's: 4,096 tokens), started on first use."""
    if kind not in _started:
        spec = KINDS[kind]
        folder = Path(tempfile.mkdtemp(prefix=f"arc-{kind}-"))
        extra = [argument.format(folder=folder) for argument in spec["extra"]]
        model = spec.get("model", prepare_tiny)()
        _started[kind] = Server(str(model), folder / "server.log", *extra, vllm_entry=spec["vllm_entry"],
                                max_model_len=spec.get("max_model_len", 4096),
                                env={**STORE, **spec.get("env", {})}).wait()
    return _started[kind]


def stop_all() -> None:
    for server in _started.values():
        server.stop()
    _started.clear()


atexit.register(stop_all)  # also when pytest is interrupted
