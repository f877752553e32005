"""relocate_kv: every implementation against the torch reference, the RoPE algebra, vLLM's
own rotary embedding as the oracle, overlaps, and clear errors before any write.

On CPU the reference and Triton (interpreter) run; tests marked ``gpu`` run the same
assertions for Triton and CUDA on a device (``bench/gpu_check.sh``).
"""

import shutil
import sys
from pathlib import Path

import pytest
import torch

from arc_vllm.kernels import available_implementations, compute_cos_sin_cache, relocate_kv
from arc_vllm.kernels.relocate_kv_reference import relocate_kv_reference

# vLLM's cos_sin_cache holds float32 angles position * inv_freq: at position ~6000 that is
# about 6000 * 6e-8 = 4e-4 rad of rounding, so identities that combine rows of different
# positions hold to about 1e-3, not to float32 epsilon.
ANGLE_TOLERANCE = dict(rtol=2e-3, atol=2e-3)
TOLERANCE = {torch.float32: dict(rtol=1e-5, atol=1e-5), torch.float16: dict(rtol=2e-3, atol=2e-3),
             torch.bfloat16: dict(rtol=1.6e-2, atol=1.6e-2)}
DTYPES = list(TOLERANCE)
CPU_IMPLS = ["reference", "triton"]


def make_case(dtype, device="cpu", num_blocks=9, block_size=16, heads=4, head_size=64,
              rotary_dim=64, tokens=40, seed=0, max_position=4096):
    generator = torch.Generator().manual_seed(seed)
    shape = (num_blocks, block_size, heads, head_size)
    key = torch.randn(shape, generator=generator).to(dtype)
    value = torch.randn(shape, generator=generator).to(dtype)
    slots = torch.randperm(num_blocks * block_size, generator=generator)
    # Spans that start mid-block and cross block boundaries: a contiguous run of slots.
    start = int(torch.randint(0, num_blocks * block_size - 2 * tokens, (1,), generator=generator))
    src = torch.arange(start, start + tokens)
    dst = slots[slots < start][:tokens] if (slots < start).sum() >= tokens else slots[-tokens:]
    delta = torch.randint(-max_position + 1, max_position, (tokens,), generator=generator)
    cache = compute_cos_sin_cache(rotary_dim, max_position)
    move = lambda t: t.to(device)  # noqa: E731
    return [move(t) for t in (key, value, src, dst, delta, cache)]


def run(impl, case, is_neox):
    key, value, src, dst, delta, cache = [t.clone() for t in case]
    used = relocate_kv(key, value, src, dst, delta, cache, is_neox, impl=impl)
    assert used == impl
    return key, value


def expected(case, is_neox):
    key, value, src, dst, delta, cache = [t.clone().cpu() for t in case]
    relocate_kv_reference(key, value, src, dst, delta, cache, is_neox)
    return key, value


@pytest.mark.parametrize("impl", CPU_IMPLS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("is_neox", [True, False])
@pytest.mark.parametrize("rotary_dim", [64, 32])
def test_matches_reference_on_cpu(impl, dtype, is_neox, rotary_dim):
    case = make_case(dtype, rotary_dim=rotary_dim, seed=rotary_dim + is_neox)
    key, value = run(impl, case, is_neox)
    want_key, want_value = expected(case, is_neox)
    torch.testing.assert_close(key, want_key, **TOLERANCE[dtype])
    assert torch.equal(value, want_value)
    # Slots that were not destinations are untouched.
    untouched = torch.ones(case[0].shape[0] * case[0].shape[1], dtype=torch.bool)
    untouched[case[3]] = False
    assert torch.equal(key.flatten(0, 1)[untouched], case[0].flatten(0, 1)[untouched])


def test_reference_rotates_exactly_what_it_moves():
    key, value, src, dst, delta, cache = make_case(torch.float32, tokens=3)
    delta = torch.zeros_like(delta)
    relocate_kv(key, value, src, dst, delta, cache, True, impl="reference")
    flat_key, flat_value = key.flatten(0, 1), value.flatten(0, 1)
    assert torch.equal(flat_key[dst], flat_key[src]) and torch.equal(flat_value[dst], flat_value[src])


@pytest.mark.parametrize("impl", CPU_IMPLS)
@pytest.mark.parametrize("is_neox", [True, False])
def test_rotating_by_d1_then_d2_equals_rotating_by_their_sum(impl, is_neox):
    key, value, src, dst, delta, cache = make_case(torch.float32, max_position=8192)
    d1 = torch.randint(-3000, 3000, delta.shape)
    d2 = torch.randint(-3000, 3000, delta.shape)
    twice = key.clone(), value.clone()
    relocate_kv(*twice, src, src, d1, cache, is_neox, impl=impl)     # in place, src == dst
    relocate_kv(*twice, src, src, d2, cache, is_neox, impl=impl)
    once = key.clone(), value.clone()
    relocate_kv(*once, src, src, d1 + d2, cache, is_neox, impl=impl)
    torch.testing.assert_close(twice[0], once[0], **ANGLE_TOLERANCE)


@pytest.mark.parametrize("impl", CPU_IMPLS)
@pytest.mark.parametrize("is_neox", [True, False])
@pytest.mark.parametrize("rotary_dim", [128, 64])
def test_vllm_rope_at_p_moved_by_d_equals_vllm_rope_at_p_plus_d(impl, is_neox, rotary_dim):
    """Oracle: vLLM's RotaryEmbedding. K computed at p and relocated by d equals K computed at
    p + d from the same unrotated projection."""
    pytest.importorskip("vllm")
    from vllm.model_executor.layers.rotary_embedding.base import RotaryEmbedding

    heads, head_size, tokens, block_size = 2, 128, 24, 16
    cache = compute_cos_sin_cache(rotary_dim, 8192)
    generator = torch.Generator().manual_seed(rotary_dim)
    raw = torch.randn(tokens, heads * head_size, generator=generator)
    positions = torch.randint(0, 4000, (tokens,), generator=generator)
    delta = torch.randint(-positions.min().item(), 4000, (tokens,), generator=generator)

    def vllm_rope(at):
        query = torch.zeros(tokens, heads * head_size)
        _, key = RotaryEmbedding.forward_static(at, query, raw.clone(), head_size, rotary_dim,
                                                cache, is_neox)
        return key.view(tokens, heads, head_size)

    key_cache = torch.zeros(4, block_size, heads, head_size)
    value_cache = torch.zeros_like(key_cache)
    src = torch.arange(5, 5 + tokens)                   # crosses a block boundary
    dst = torch.arange(40, 40 + tokens)
    key_cache.view(-1, heads, head_size)[src] = vllm_rope(positions)
    relocate_kv(key_cache, value_cache, src, dst, delta, cache, is_neox, impl=impl)
    torch.testing.assert_close(key_cache.view(-1, heads, head_size)[dst],
                               vllm_rope(positions + delta), **ANGLE_TOLERANCE)


@pytest.mark.parametrize("impl", CPU_IMPLS)
@pytest.mark.parametrize("shift", [-12, 12])
def test_overlapping_shifts_are_handled(impl, shift):
    """A compaction moves retained text to other positions in the same cache: destinations
    overlap sources. The result equals moving from an untouched copy (a right shift processed
    in order would read slots it already overwrote)."""
    key, value, _, _, _, cache = make_case(torch.float32)
    src = torch.arange(30, 70)
    dst = src + shift
    delta = torch.full_like(src, shift)
    original = key.clone(), value.clone()
    relocate_kv(key, value, src, dst, delta, cache, True, impl=impl)
    want_key, want_value = original[0].clone(), original[1].clone()
    relocate_kv_reference(want_key, want_value, src, dst, delta, cache, True)
    flat = original[1].flatten(0, 1)
    assert torch.equal(value.flatten(0, 1)[dst], flat[src])
    torch.testing.assert_close(key, want_key, rtol=1e-5, atol=1e-5)


def test_staging_is_chosen_exactly_when_a_written_slot_is_read_by_another_token():
    from arc_vllm.kernels.relocate_kv import _needs_staging

    slots = torch.arange(10)
    assert not _needs_staging(slots, slots + 100)       # disjoint
    assert not _needs_staging(slots, slots)             # each token rotated in place
    assert _needs_staging(slots, slots + 1)             # token i writes what token i+1 reads
    assert _needs_staging(torch.tensor([3, 3]), torch.tensor([3, 4]))  # slot 3 read twice


def test_bad_input_is_refused_before_any_write():
    key, value, src, dst, delta, cache = make_case(torch.float16)
    snapshot = key.clone(), value.clone()
    cases = {
        "key_cache must be": dict(key=key[0]),
        "value_cache shape": dict(value=value[:, :8]),
        "one dtype": dict(value=value.float()),
        "1-D int64": dict(src=src.int()),
        "one entry per token": dict(dst=dst[:-1]),
        r"must lie in \[0, 144\)": dict(dst=torch.where(dst == dst[0], 10_000, dst)),
        "src_slots must lie": dict(src=src - 1000),
        "cos_sin_cache rows": dict(delta=delta * 0 + 5000),
        "rotary_dim": dict(cache=compute_cos_sin_cache(66, 4096)[:, :65]),
        "must be distinct": dict(dst=torch.cat([dst[:1], dst[:-1]])),
        "last dimension": dict(key=key.transpose(2, 3).contiguous().transpose(2, 3)),
    }
    for message, change in cases.items():
        args = dict(key=key, value=value, src=src, dst=dst, delta=delta, cache=cache) | change
        with pytest.raises(ValueError, match=message):
            relocate_kv(args["key"], args["value"], args["src"], args["dst"], args["delta"],
                        args["cache"], True)
        assert torch.equal(key, snapshot[0]) and torch.equal(value, snapshot[1])
    with pytest.raises(ValueError, match="impl="):
        relocate_kv(key, value, src, dst, delta, cache, True, impl="fastest")
    if "cuda" not in available_implementations("cpu"):
        with pytest.raises(ValueError, match="not available"):
            relocate_kv(key, value, src, dst, delta, cache, True, impl="cuda")


def test_auto_picks_the_reference_on_cpu_and_empty_moves_do_nothing():
    key, value, src, dst, delta, cache = make_case(torch.float32)
    assert relocate_kv(key.clone(), value.clone(), src, dst, delta, cache, True) == "reference"
    empty = torch.empty(0, dtype=torch.int64)
    before = key.clone()
    relocate_kv(key, value, empty, empty, empty, cache, False, impl="triton")
    assert torch.equal(key, before)


@pytest.mark.skipif(not shutil.which("nvcc"), reason="the build check needs nvcc")
def test_csrc_compiles_with_nvcc_and_against_this_torch(tmp_path):
    from arc_vllm.kernels.relocate_kv_cuda import build_check

    objects = build_check(str(tmp_path))
    assert all((tmp_path / name).stat().st_size > 0 for name in
               ("relocate_kv.o", "relocate_kv_binding.o")) and len(objects) == 2


# --- the same assertions on a GPU ----------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("impl", ["triton", "cuda"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("is_neox", [True, False])
@pytest.mark.parametrize("rotary_dim", [128, 64])
def test_matches_reference_on_gpu(impl, dtype, is_neox, rotary_dim):
    assert impl in available_implementations("cuda")
    case = make_case(dtype, device="cuda", num_blocks=64, head_size=128, heads=8,
                     rotary_dim=rotary_dim, tokens=300, seed=rotary_dim + is_neox)
    key, value = run(impl, case, is_neox)
    want_key, want_value = expected(case, is_neox)
    torch.testing.assert_close(key.cpu(), want_key, **TOLERANCE[dtype])
    assert torch.equal(value.cpu(), want_value)


@pytest.mark.gpu
@pytest.mark.parametrize("impl", ["triton", "cuda"])
@pytest.mark.parametrize("is_neox", [True, False])
def test_algebra_and_overlap_on_gpu(impl, is_neox):
    key, value, src, dst, delta, cache = make_case(torch.float32, device="cuda",
                                                   max_position=8192)
    d1 = torch.randint(-3000, 3000, delta.shape, device="cuda")
    d2 = torch.randint(-3000, 3000, delta.shape, device="cuda")
    twice, once = (key.clone(), value.clone()), (key.clone(), value.clone())
    relocate_kv(*twice, src, src, d1, cache, is_neox, impl=impl)
    relocate_kv(*twice, src, src, d2, cache, is_neox, impl=impl)
    relocate_kv(*once, src, src, d1 + d2, cache, is_neox, impl=impl)
    torch.testing.assert_close(twice[0], once[0], **ANGLE_TOLERANCE)
    shift_src = torch.arange(30, 70, device="cuda")
    shift = key.clone(), value.clone()
    relocate_kv(*shift, shift_src, shift_src - 12, torch.full_like(shift_src, -12), cache,
                is_neox, impl=impl)
    want = key.clone().cpu(), value.clone().cpu()
    relocate_kv_reference(*want, shift_src.cpu(), shift_src.cpu() - 12,
                          torch.full((40,), -12), cache.cpu(), is_neox)
    torch.testing.assert_close(shift[0].cpu(), want[0], rtol=1e-5, atol=1e-5)
    assert torch.equal(shift[1].cpu(), want[1])


@pytest.mark.parametrize("impl", CPU_IMPLS)
def test_trusted_calls_skip_value_checks_but_not_shape_checks(impl):
    key, value, _, _, delta, cache = make_case(torch.float32)
    src, dst = torch.arange(0, 40), torch.arange(100, 140)  # disjoint, as a trusted caller promises
    want = expected([key, value, src, dst, delta, cache], True)
    relocate_kv(key, value, src, dst, delta, cache, True, impl=impl, trusted=True)
    torch.testing.assert_close(key, want[0], rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="one dtype"):
        relocate_kv(key, value.half(), src, dst, delta, cache, True, impl=impl, trusted=True)


def test_kernels_is_arc_vllms_only_and_transformers_sees_no_kernels_hub():
    """kernels/ is importable as ``arc_vllm.kernels`` only: under the suite nothing on sys.path
    makes it a top-level ``kernels``, so transformers' check for the Hugging Face kernels hub
    (``is_kernels_available``, which imports what it finds) finds nothing."""
    import importlib.util

    from transformers.utils.import_utils import is_kernels_available

    import arc_vllm.kernels

    assert importlib.util.find_spec("kernels") is None and "kernels" not in sys.modules
    assert not is_kernels_available()
    assert Path(arc_vllm.kernels.__file__).parent.name == "kernels"
