"""vLLM-CPU's KV layouts, pinned against the engine.

- Each ISA's mapping (``vec``, ``vec16``, ``amx``) equals what vLLM's own
  ``cpu_attn_reshape_and_cache`` writes for that ISA, in float32 and bfloat16 (the write is plain
  stores, so every ISA's layout can be read here, AMX or not).
- Relocation on the real engine's cache: a span's layer-0 KV computed at positions p, moved to
  p + delta with ``relocate_kv_cpu`` in the layout of the ISA the engine picked, equals the
  layer-0 KV the engine computes for the same tokens at p + delta (layer 0 sees only the token
  and its position; deeper layers see the changed text before the span and need not). The
  real engine on the tiny model, in float32 and bfloat16 (on an AMX machine the latter is
  ``amx``).

    pytest tests/test_cpu_layout.py
"""

import json
import os
import subprocess
import sys

import pytest
import torch

from arc_vllm.kernels import compute_cos_sin_cache
from arc_vllm.kernels.cpu_layout import CPU_LAYOUTS, read_tokens, relocate_kv_cpu, slab_offsets, write_tokens
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


DTYPES = ["float32", "bfloat16"]


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
    result = {"isa": isa, "value_same_at_both_positions": torch.equal(value_at_0, engine_value),
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


@pytest.mark.slow
@pytest.mark.parametrize("dtype", DTYPES)
def test_layer0_kv_moved_by_relocation_equals_the_engines_own(dtype):
    done = subprocess.run([sys.executable, __file__, dtype], capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, VLLM_ENABLE_V1_MULTIPROCESSING="0"))
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["isa"] in CPU_LAYOUTS
    assert result["value_same_at_both_positions"]  # the layout is read right: V is position-free
    assert result["key_differs_by_position"] > 1e-2  # K carries its position
    assert result["relocated_value_equal"]
    # Moved K equals the engine's own at p + 40 (bfloat16: up to one more rounding).
    assert result["relocated_key_error"] < (1e-5 if dtype == "float32" else 2 ** -5)
    assert result["layer1_key_error"] > max(result["relocated_key_error"], 1e-3)  # only layer 0 is exact


def written_by_the_engine(isa: str, dtype: torch.dtype, block_size: int, head_size: int):
    """For every (token, dim) of one block, where vLLM's own write put its K and its V: each
    element is written as its token + 1 and, in a second pass, as its dim + 1 (exact in
    bfloat16 up to 256), and the two are read back position by position."""
    from vllm import _custom_ops as ops

    tokens = torch.arange(block_size).view(-1, 1, 1).expand(block_size, 1, head_size)
    dims = torch.arange(head_size).view(1, 1, -1).expand(block_size, 1, head_size)
    read = []
    for code in (tokens, dims):
        cache = torch.zeros(1, 1, block_size, 2 * head_size, dtype=dtype)
        key_cache, value_cache = cache.view(1, 1, 2 * block_size, head_size).chunk(2, dim=2)
        source = (code + 1).to(dtype).contiguous()
        ops.cpu_attn_reshape_and_cache(source, source, key_cache, value_cache, torch.arange(block_size), isa)
        read.append(cache.reshape(-1).long() - 1)
    where = {}
    for half, start in (("key", 0), ("value", block_size * head_size)):
        table = torch.full((block_size, head_size), -1, dtype=torch.long)
        offsets = torch.arange(start, start + block_size * head_size)
        table[read[0][offsets], read[1][offsets]] = offsets
        where[half] = table
    return where["key"], where["value"]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("isa,head_size", [("vec", 64), ("vec", 128), ("vec16", 80), ("amx", 64), ("amx", 128)])
def test_each_isa_layout_is_where_the_engines_own_write_puts_it(isa, head_size, dtype):
    key, value = written_by_the_engine(isa, dtype, 128, head_size)
    ours_key, ours_value = slab_offsets(isa, 128, head_size, dtype.itemsize)
    assert torch.equal(ours_key, key) and torch.equal(ours_value, value)


def test_the_layouts_differ_and_an_unknown_isa_is_refused():
    from arc_vllm.kernels.cpu_layout import UnsupportedKVLayout

    vec, amx = slab_offsets("vec", 128, 64, 2), slab_offsets("amx", 128, 64, 2)
    assert not torch.equal(vec[0], amx[0]) and not torch.equal(vec[1], amx[1])
    with pytest.raises(UnsupportedKVLayout, match="neon"):
        slab_offsets("neon", 128, 64, 2)
    with pytest.raises(ValueError, match="2 \\* head_size"):
        read_tokens(torch.zeros(3, 2, 32, 15), torch.arange(4))


if __name__ == "__main__":
    print(json.dumps(engine_check(sys.argv[1])))
