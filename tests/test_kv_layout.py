"""The KV-reuse connector's fill, without vLLM: saved K and V placed into a request's slots at new
positions, on each of vLLM-CPU's layouts (one per attention ISA: vec, vec16, amx) and on the GPU's paged
(flash-attn) layout, in float32 and bfloat16. A key saved at
position p and filled at p + delta must equal the same key rotated straight to p + delta; V is
copied as is. CPU runs the torch reference; tests marked ``gpu`` run the paged layout on a
device with the Triton and CUDA kernels (``bench/gpu_check.sh``).

    pytest tests/test_kv_layout.py
"""

import pytest
import torch

from arc_vllm.kernels import available_implementations, compute_cos_sin_cache
from arc_vllm.kernels.cpu_layout import UnsupportedKVLayout
from arc_vllm.kernels.kv_layout import LayerCache, slots_of
from arc_vllm.kernels.rope import rotate

BLOCK, HEADS, HEAD_SIZE, BLOCKS = 32, 2, 64, 12  # vLLM-CPU blocks are multiples of 32
# (position in the new prompt, position saved, length): one piece moved right across block
# boundaries, the next moved left, end to end as the connector claims them.
PIECES = [(37, 5, 40), (77, 90, 30)]
BLOCK_IDS = [7, 2, 11, 0, 5, 9, 3]  # the request's blocks, in no particular order


LAYOUTS = ["vec", "vec16", "amx", "paged"]
DTYPES = [torch.float32, torch.bfloat16]


def make_cache(layout: str, device: str = "cpu", dtype=torch.float32) -> torch.Tensor:
    if layout != "paged":
        return torch.zeros(BLOCKS, HEADS, BLOCK, 2 * HEAD_SIZE, device=device, dtype=dtype)
    return torch.zeros(2, BLOCKS, BLOCK, HEADS, HEAD_SIZE, device=device, dtype=dtype)


def saved_prompt(tokens: int = 128):
    """Unrotated keys and values of a saved prompt, and its keys as the engine stores them."""
    generator = torch.Generator().manual_seed(0)
    raw = torch.randn(tokens, HEADS, HEAD_SIZE, generator=generator)
    value = torch.randn(tokens, HEADS, HEAD_SIZE, generator=generator)
    cos_sin = compute_cos_sin_cache(HEAD_SIZE, 512)
    key = rotate(raw, torch.arange(tokens), cos_sin, is_neox=True)
    return raw, key, value, cos_sin


def check_fill(layer: LayerCache, cos_sin: torch.Tensor) -> None:
    raw, key, value, _ = saved_prompt()
    dtype = layer.tensor.dtype
    key, value = key.to(dtype), value.to(dtype)
    # bfloat16 keeps 8 bits of mantissa: a rotated key is rounded once more when stored.
    tolerance = 1e-4 if dtype == torch.float32 else 3e-2
    layer.fill(key, value, PIECES, BLOCK_IDS, cos_sin.to(layer.tensor.device), is_neox=True)
    for new, old, length in PIECES:
        slots = slots_of(BLOCK_IDS, new, length, BLOCK).to(layer.tensor.device)
        got_key, got_value = layer.read(slots)
        want = rotate(raw[old:old + length], torch.arange(new, new + length), cos_sin, is_neox=True)
        torch.testing.assert_close(got_key.cpu().float(), want, rtol=tolerance, atol=tolerance)
        assert torch.equal(got_value.cpu(), value[old:old + length])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_fill_places_saved_kv_at_new_positions(layout, dtype):
    _, _, _, cos_sin = saved_prompt()
    layer = LayerCache(make_cache(layout, dtype=dtype), layout)
    check_fill(layer, cos_sin)
    # Nothing outside the claimed slots is touched.
    claimed = torch.cat([slots_of(BLOCK_IDS, new, length, BLOCK) for new, _, length in PIECES])
    others = torch.tensor(sorted(set(range(BLOCKS * BLOCK)) - set(claimed.tolist())))
    key, value = layer.read(others)
    assert not key.any() and not value.any()


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_layout_holds_the_same_tokens_in_different_places(dtype):
    _, key, value, cos_sin = saved_prompt()
    layers = [LayerCache(make_cache(layout, dtype=dtype), layout) for layout in LAYOUTS]
    for layer in layers:
        layer.fill(key.to(dtype), value.to(dtype), PIECES, BLOCK_IDS, cos_sin, is_neox=True)
    slots = slots_of(BLOCK_IDS, 37, 70, BLOCK)
    for layer in layers[1:]:
        for a, b in zip(layers[0].read(slots), layer.read(slots)):
            assert torch.equal(a, b)
    # ... and amx's placement differs from vec's: reading one as the other garbles K and V.
    vec, amx = layers[0], layers[2]
    assert not torch.equal(vec.tensor, amx.tensor)
    wrong = LayerCache(amx.tensor, "vec").read(slots)
    assert not torch.equal(wrong[0], vec.read(slots)[0]) and not torch.equal(wrong[1], vec.read(slots)[1])


def test_a_cache_of_another_shape_or_an_unknown_layout_is_refused():
    with pytest.raises(ValueError, match="CPU KV cache"):
        LayerCache(torch.zeros(4, 2, 16), "vec")
    with pytest.raises(ValueError, match="paged KV cache"):
        LayerCache(torch.zeros(3, 4, 16, 2, 32), "paged")
    with pytest.raises(UnsupportedKVLayout, match="neon"):
        LayerCache(torch.zeros(4, 2, 32, 128), "neon")


@pytest.mark.gpu
@pytest.mark.parametrize("impl", ["triton", "cuda"])
def test_fill_on_the_gpu_paged_layout(impl):
    if impl not in available_implementations("cuda"):
        pytest.fail(f"{impl} is not available on this GPU")
    _, _, _, cos_sin = saved_prompt()
    check_fill(LayerCache(make_cache("paged", "cuda"), "paged", impl=impl), cos_sin)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ["vec", "amx", "paged"])
def test_kv_moved_twice_is_rotated_once_from_where_it_was_computed(layout, dtype):
    """The worker saves a view whose run was moved (``SavedKV.carry``: the run as the last view
    kept it, with the position it was computed at); moving the run again rotates it from there,
    so two moves give exactly what one move to the final position gives. Saving what the cache
    holds instead (already rotated and, in bfloat16, rounded) would round again."""
    from arc_vllm.kv.connector_worker import SavedKV

    _, key, value, cos_sin = saved_prompt()
    key, value = key.to(dtype), value.to(dtype)
    run = 40
    # The first view computed the run at 5..45; the second view has it at 37..77 (moved); the
    # third at 90..130 (moved again, from the second view's 37).
    first = SavedKV({"layer": (key, value)}, 0, len(key))
    second_layer = LayerCache(make_cache(layout, dtype=dtype), layout)
    second_layer.fill(key, value, first.rows([(37, 5, run)]), BLOCK_IDS, cos_sin, True, origin=first.origin)
    held = second_layer.read(slots_of(BLOCK_IDS, 0, 128, BLOCK))
    second = SavedKV({"layer": tuple(part.clone() for part in held)}, 0, 128)
    second.carry(first, [(37, 5, run)])
    assert second.origin[37:77].tolist() == list(range(5, 45)) and second.origin[77] == 77
    twice = LayerCache(make_cache(layout, dtype=dtype), layout)
    twice.fill(*second.layers["layer"], second.rows([(90, 37, run)]), BLOCK_IDS, cos_sin, True,
               origin=second.origin)
    once = LayerCache(make_cache(layout, dtype=dtype), layout)
    once.fill(key, value, first.rows([(90, 5, run)]), BLOCK_IDS, cos_sin, True, origin=first.origin)
    slots = slots_of(BLOCK_IDS, 90, run, BLOCK)
    assert all(torch.equal(a, b) for a, b in zip(twice.read(slots), once.read(slots)))
    # What the cache held, moved again: a second rotation, which bfloat16 rounds again.
    again = LayerCache(make_cache(layout, dtype=dtype), layout)
    again.fill(*held, [(90, 37, run)], BLOCK_IDS, cos_sin, True)
    moved_again = again.read(slots)[0]
    if dtype == torch.bfloat16:
        assert not torch.equal(moved_again, once.read(slots)[0])
    torch.testing.assert_close(moved_again.float(), once.read(slots)[0].float(), rtol=3e-2, atol=3e-2)
