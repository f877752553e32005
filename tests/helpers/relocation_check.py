"""Relocation on the real engine's cache, in a process of its own (the engine there is the only
one; a test session's shared in-process engine is left alone): a span's layer-0 KV computed at
positions p, moved to p + 40 with ``relocate_kv_cpu`` in the layout of the ISA the engine
picked, against the layer-0 KV the engine computes for the same tokens at p + 40. Prints the
figures as JSON; ``tests/test_cpu_layout.py`` runs it per dtype:

    VLLM_ENABLE_V1_MULTIPROCESSING=0 .venv/bin/python tests/helpers/relocation_check.py float32
"""

import json
import sys

import torch

from arc_vllm import vllm_compat
from arc_vllm.kernels import compute_cos_sin_cache
from arc_vllm.kernels.cpu_layout import read_tokens, relocate_kv_cpu, write_tokens
from arc_vllm.model_prep import prepare_tiny

SPAN = list(range(300, 364))  # 64 tokens
PREFIX = list(range(1000, 1040))  # 40 tokens before the span in the second prompt


def prefill(llm, request_id: str, tokens: list[int]) -> torch.Tensor:
    """The request's slots, one per prompt token, after its prefill (the request still runs)."""
    from vllm import SamplingParams, TokensPrompt

    engine = llm.llm_engine
    engine.add_request(request_id, TokensPrompt(prompt_token_ids=tokens),
                       SamplingParams(max_tokens=4, ignore_eos=True))
    scheduler = engine.engine_core.engine_core.scheduler
    for _ in range(4):  # until the prompt is prefilled (its first token sampled)
        if any(output.outputs[0].token_ids for output in engine.step()):
            break
    # The engine keys a request by the given id plus a suffix of its own.
    [internal] = [key for key in scheduler.requests if key.startswith(request_id + "-")]
    [blocks] = scheduler.kv_cache_manager.get_block_ids(internal)
    block_size = scheduler.kv_cache_config.kv_cache_groups[0].kv_cache_spec.block_size
    return torch.tensor([blocks[i // block_size] * block_size + i % block_size
                         for i in range(len(tokens))], dtype=torch.int64)


def engine_check(dtype: str) -> dict:
    """Runs in its own process (``__main__`` below): the engine there is the only one, and the
    session's shared in-process engine is left alone."""
    from vllm import LLM

    llm = LLM(model=str(prepare_tiny()), enforce_eager=True, max_model_len=1024, dtype=dtype,
              enable_prefix_caching=False, gpu_memory_utilization=0.1)
    caches = llm.llm_engine.engine_core.engine_core.model_executor.driver_worker.worker.model_runner.kv_caches
    isa = llm.llm_engine.vllm_config.compilation_config.static_forward_context["model.layers.0.self_attn.attn"].isa
    layer0 = caches[0]
    first = prefill(llm, "span-at-0", SPAN)
    second = prefill(llm, "span-at-40", PREFIX + SPAN)
    span_slots = second[len(PREFIX):]
    engine_key, engine_value = read_tokens(layer0, span_slots, isa)
    key_at_0, value_at_0 = read_tokens(layer0, first, isa)
    scale = engine_key.float().abs().max().item()
    result = {"isa": isa, "vllm_build": vllm_compat.cpu_build(), "value_same_at_both_positions": torch.equal(value_at_0, engine_value),
              "key_differs_by_position": (key_at_0.float() - engine_key.float()).abs().max().item() / scale}
    # Overwrite the second prompt's span with the first prompt's, moved by +40.
    write_tokens(layer0, span_slots, torch.zeros_like(engine_key), torch.zeros_like(engine_value), isa)
    config = llm.llm_engine.vllm_config.model_config.hf_config
    head_size = config.hidden_size // config.num_attention_heads
    cos_sin = compute_cos_sin_cache(head_size, 1024, base=10000.0)
    delta = torch.full((len(SPAN),), len(PREFIX), dtype=torch.int64)
    relocate_kv_cpu(layer0, first, span_slots, delta, cos_sin, True, isa)
    key, value = read_tokens(layer0, span_slots, isa)
    result["relocated_value_equal"] = torch.equal(value, engine_value)
    result["relocated_key_error"] = (key.float() - engine_key.float()).abs().max().item() / scale
    # Deeper layers: the span's KV depends on the text before it, so a move is not exact.
    moved = caches[1].clone()
    relocate_kv_cpu(moved, first, span_slots, delta, cos_sin, True, isa)
    moved_key, held_key = read_tokens(moved, span_slots, isa)[0], read_tokens(caches[1], span_slots, isa)[0]
    result["layer1_key_error"] = (moved_key.float() - held_key.float()).abs().max().item() / held_key.float().abs().max().item()
    return result


if __name__ == "__main__":
    print(json.dumps(engine_check(sys.argv[1])))
