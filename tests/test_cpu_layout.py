"""Relocation on vLLM-CPU's own KV cache: a span's layer-0 KV computed at positions p, moved to
p + delta with ``relocate_kv_cpu``, equals the layer-0 KV the engine computes for the same
tokens at p + delta (layer 0 sees only the token and its position, so the two must agree; deeper
layers see the changed text before the span and need not). The real in-process engine on the
tiny model, float32.

    pytest tests/test_cpu_layout.py
"""

import json
import os
import subprocess
import sys

import pytest
import torch

from arc_vllm.kernels import compute_cos_sin_cache
from arc_vllm.kernels.cpu_layout import key_value_views, read_tokens, relocate_kv_cpu, write_tokens
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


def engine_check() -> dict:
    """Runs in its own process (``__main__`` below): the engine there is the only one, float32,
    and the session's shared in-process engine is left alone."""
    from vllm import LLM

    llm = LLM(model=str(prepare_tiny()), enforce_eager=True, max_model_len=1024, dtype="float32",
              enable_prefix_caching=False, gpu_memory_utilization=0.1)
    caches = llm.llm_engine.engine_core.engine_core.model_executor.driver_worker.worker.model_runner.kv_caches
    layer0 = caches[0]
    first = prefill(llm, "span-at-0", SPAN)
    second = prefill(llm, "span-at-40", PREFIX + SPAN)
    span_slots = second[len(PREFIX):]
    engine_key, engine_value = read_tokens(layer0, span_slots)
    key_at_0, value_at_0 = read_tokens(layer0, first)
    result = {"value_same_at_both_positions": torch.equal(value_at_0, engine_value),
              "key_differs_by_position": (key_at_0 - engine_key).abs().max().item()}
    # Overwrite the second prompt's span with the first prompt's, moved by +40.
    write_tokens(layer0, span_slots, torch.zeros_like(engine_key), torch.zeros_like(engine_value))
    config = llm.llm_engine.vllm_config.model_config.hf_config
    head_size = config.hidden_size // config.num_attention_heads
    cos_sin = compute_cos_sin_cache(head_size, 1024, base=10000.0)
    delta = torch.full((len(SPAN),), len(PREFIX), dtype=torch.int64)
    relocate_kv_cpu(layer0, first, span_slots, delta, cos_sin, is_neox=True)
    key, value = read_tokens(layer0, span_slots)
    result["relocated_value_equal"] = torch.equal(value, engine_value)
    result["relocated_key_max_error"] = (key - engine_key).abs().max().item()
    # Deeper layers: the span's KV depends on the text before it, so a move is not exact.
    moved = caches[1].clone()
    relocate_kv_cpu(moved, first, span_slots, delta, cos_sin, is_neox=True)
    result["layer1_key_max_error"] = (read_tokens(moved, span_slots)[0]
                                      - read_tokens(caches[1], span_slots)[0]).abs().max().item()
    return result


@pytest.mark.slow
def test_layer0_kv_moved_by_relocation_equals_the_engines_own():
    done = subprocess.run([sys.executable, __file__], capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, VLLM_ENABLE_V1_MULTIPROCESSING="0"))
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["value_same_at_both_positions"]  # the layout is read right: V is position-free
    assert result["key_differs_by_position"] > 1e-3  # K carries its position
    assert result["relocated_value_equal"]
    assert result["relocated_key_max_error"] < 1e-5  # moved K equals the engine's own at p + 40
    assert result["layer1_key_max_error"] > 1e-3  # and only layer 0 is exact


def test_views_are_the_cache_itself():
    cache = torch.zeros(3, 2, 32, 16)
    keys, values = key_value_views(cache)
    keys[1, 0, :, 5] = 1.0
    values[2, 1, 7, :] = 2.0
    assert cache[1, 0].reshape(-1)[:8 * 32].view(8, 32)[:, 5].eq(1).all()
    assert cache[2, 1].reshape(-1)[8 * 32:].view(32, 8)[7].eq(2).all()
    with pytest.raises(ValueError, match="2 \\* head_size"):
        key_value_views(torch.zeros(3, 2, 32, 15))


if __name__ == "__main__":
    print(json.dumps(engine_check()))
