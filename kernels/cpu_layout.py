"""vLLM-CPU's KV cache layouts, one per attention ISA, and ``relocate_kv`` on them.

vLLM 0.32's CPU attention backend keeps, per layer, one tensor
``[num_blocks, num_kv_heads, block_size, 2 * head_size]`` (layout "LBHNC"): each (block, head)
slab holds ``block_size * head_size`` key elements, then as many value elements. How the
elements of a block's tokens are placed inside those two halves depends on the attention ISA
vLLM picks per layer (``_get_attn_isa`` in ``vllm/v1/attention/backends/cpu_attn.py``, set as
``layer.isa``), because ``cpu_attn_reshape_and_cache`` writes a kernel-friendly layout:

- ``vec`` and ``vec16`` (AVX2/AVX-512 without AMX, or head sizes not a multiple of 32): K
  transposed, ``K[d, t]`` at ``d * block_size + t``; V row-major, ``V[t, d]`` at
  ``t * head_size + d``.
- ``amx`` (bfloat16 where AMX tiles exist): with ``pack = 4 // itemsize`` elements per 32-bit
  word (2 for bfloat16), K in groups of 16 tokens, each group ``[head_size / pack, 16 tokens,
  pack]``: ``K[d, t]`` at ``(t // 16) * 16 * head_size + (d // pack) * 16 * pack + (t % 16) *
  pack + d % pack``; V in groups of 16 head dims, each ``[block_size / pack, 16 dims, pack]``:
  ``V[t, d]`` at ``(d // 16) * block_size * 16 + (t // pack) * 16 * pack + (d % 16) * pack + t %
  pack`` (the AMX B-matrix VNNI packing).

Each mapping was read off the engine's own write (``cpu_attn_reshape_and_cache`` with that
ISA: plain stores, which vLLM's ``_C`` build runs for every ISA on any CPU with AVX-512 and
bf16; its ``_C_AVX512`` and ``_C_AVX2`` builds write ``vec`` and ``vec16`` only) and is pinned by
``tests/test_cpu_layout.py``: live where the build writes it, and everywhere against that
write as recorded (``tests/fixtures/cpu_layouts.json``). An ISA not listed here raises ``UnsupportedKVLayout``: KV reuse
refuses it rather than write a layout it does not know.

``read_tokens`` / ``write_tokens`` gather and scatter K and V of slots (slot = block *
block_size + offset) as ``[n, heads, head_size]``; ``relocate_kv_cpu`` moves tokens between
slots and re-rotates their keys (the torch reference rotation). Run ``python -m
arc_vllm.kernels.cpu_layout`` for a round trip over every layout.
"""

from __future__ import annotations

from functools import lru_cache

import torch

from arc_vllm.kernels.rope import rotate

CPU_LAYOUTS = ("vec", "vec16", "amx")


class UnsupportedKVLayout(ValueError):
    """A KV cache layout this project cannot read or write (ISA, backend or cache dtype)."""


@lru_cache(maxsize=32)
def slab_offsets(isa: str, block_size: int, head_size: int, itemsize: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Where ``K[t, d]`` and ``V[t, d]`` of a block's token t sit inside its (block, head) slab:
    two int64 ``[block_size, head_size]`` tables of element offsets (V's already past K's half)."""
    tokens = torch.arange(block_size).view(-1, 1)
    dims = torch.arange(head_size).view(1, -1)
    if isa in ("vec", "vec16"):
        key = dims * block_size + tokens
        value = tokens * head_size + dims
    elif isa == "amx":
        pack = 4 // itemsize
        if block_size % 16 or head_size % 16 or head_size % pack:
            raise UnsupportedKVLayout(f"the amx layout needs block_size and head_size divisible by 16; "
                                      f"got {block_size}, {head_size}")
        key = (tokens // 16) * 16 * head_size + (dims // pack) * 16 * pack + (tokens % 16) * pack + dims % pack
        value = (dims // 16) * block_size * 16 + (tokens // pack) * 16 * pack + (dims % 16) * pack + tokens % pack
    else:
        raise UnsupportedKVLayout(f"vLLM-CPU attention ISA {isa!r} has no known KV layout here "
                                  f"(known: {', '.join(CPU_LAYOUTS)})")
    return key.expand(block_size, head_size).contiguous(), (value + block_size * head_size).expand(
        block_size, head_size).contiguous()


def _index(layer_cache: torch.Tensor, slots: torch.Tensor, isa: str):
    if layer_cache.dim() != 4 or layer_cache.shape[-1] % 2 or not layer_cache.is_contiguous():
        raise ValueError(f"a CPU KV cache is contiguous [blocks, heads, block_size, 2 * head_size]; "
                         f"got {tuple(layer_cache.shape)}")
    blocks, heads, block_size, twice = layer_cache.shape
    key, value = slab_offsets(isa, block_size, twice // 2, layer_cache.element_size())
    flat = layer_cache.view(blocks, heads, block_size * twice)
    offsets = (slots % block_size).cpu()
    return flat, (slots // block_size)[:, None], key[offsets].to(slots.device), value[offsets].to(slots.device)


def read_tokens(layer_cache: torch.Tensor, slots: torch.Tensor, isa: str = "vec") -> tuple[torch.Tensor, torch.Tensor]:
    """Copies of K and V at ``slots``, each ``[n, heads, head_size]``."""
    flat, blocks, key, value = _index(layer_cache, slots, isa)
    # flat[blocks [n, 1], :, offsets [n, d]] is [n, d, heads]: the advanced indices come first.
    return flat[blocks, :, key].transpose(1, 2), flat[blocks, :, value].transpose(1, 2)


def write_tokens(layer_cache: torch.Tensor, slots: torch.Tensor, key: torch.Tensor,
                 value: torch.Tensor, isa: str = "vec") -> None:
    flat, blocks, key_offsets, value_offsets = _index(layer_cache, slots, isa)
    flat[blocks, :, key_offsets] = key.to(layer_cache.dtype).transpose(1, 2)
    flat[blocks, :, value_offsets] = value.to(layer_cache.dtype).transpose(1, 2)


def relocate_kv_cpu(layer_cache: torch.Tensor, src_slots: torch.Tensor, dst_slots: torch.Tensor,
                    pos_delta: torch.Tensor, cos_sin_cache: torch.Tensor, is_neox: bool,
                    isa: str = "vec") -> None:
    """``relocate_kv`` (same meaning) on one layer of vLLM-CPU's cache, in place: the sources are
    read before anything is written, so overlapping slots are handled."""
    if not (src_slots.shape == dst_slots.shape == pos_delta.shape):
        raise ValueError("src_slots, dst_slots and pos_delta must have the same length")
    key, value = read_tokens(layer_cache, src_slots, isa)
    write_tokens(layer_cache, dst_slots, rotate(key, pos_delta, cos_sin_cache, is_neox), value, isa)


if __name__ == "__main__":
    from arc_vllm.kernels.rope import compute_cos_sin_cache

    torch.manual_seed(0)
    cos_sin = compute_cos_sin_cache(64, 512)
    for isa in CPU_LAYOUTS:
        for dtype in (torch.float32, torch.bfloat16):
            cache = torch.zeros(4, 2, 32, 128, dtype=dtype)
            slots = torch.arange(5, 60)
            key, value = torch.randn(55, 2, 64).to(dtype), torch.randn(55, 2, 64).to(dtype)
            write_tokens(cache, slots, key, value, isa)
            back_key, back_value = read_tokens(cache, slots, isa)
            print(f"{isa:6s} {str(dtype):15s} round trip exact: "
                  f"{torch.equal(back_key, key) and torch.equal(back_value, value)}")
