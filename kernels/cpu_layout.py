"""vLLM-CPU's KV cache layout, and ``relocate_kv`` on it.

vLLM 0.32's CPU attention backend keeps, per layer, one tensor
``[num_blocks, num_kv_heads, block_size, 2 * head_size]`` (layout "LBHNC"). Inside each
(block, head) slab of ``2 * block_size * head_size`` elements the kernel stores K transposed,
``[head_size, block_size]``, then V, ``[block_size, head_size]`` (read back from the engine's own
cache and checked against K and V computed by transformers, float32: equal). ``key_value_views``
gives both as views, so writes land in the engine's cache.

``relocate_kv_cpu`` moves (and re-rotates) tokens between slots of that cache: the blocks it
touches are gathered into the paged layout ``relocate_kv`` takes (``[blocks, block_size,
heads, head_size]``), relocated there, and written back. Used for KV reuse on CPU; on a GPU
the engine's paged layout is relocated in place by the Triton/CUDA kernels.
"""

from __future__ import annotations

import torch

from arc_vllm.kernels.relocate_kv import relocate_kv


def key_value_views(layer_cache: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(K ``[blocks, heads, head_size, block_size]``, V ``[blocks, heads, block_size, head_size]``),
    views of one layer's CPU cache."""
    if layer_cache.dim() != 4 or layer_cache.shape[-1] % 2 or not layer_cache.is_contiguous():
        raise ValueError(f"a CPU KV cache is contiguous [blocks, heads, block_size, 2 * head_size]; "
                         f"got {tuple(layer_cache.shape)}")
    blocks, heads, block_size, twice = layer_cache.shape
    head_size = twice // 2
    flat = layer_cache.view(blocks, heads, 2 * block_size * head_size)
    keys = flat[..., :block_size * head_size].view(blocks, heads, head_size, block_size)
    values = flat[..., block_size * head_size:].view(blocks, heads, block_size, head_size)
    return keys, values


def read_tokens(layer_cache: torch.Tensor, slots: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """K and V of ``slots`` (slot = block * block_size + offset), each ``[n, heads, head_size]``."""
    keys, values = key_value_views(layer_cache)
    block_size = layer_cache.shape[2]
    blocks, offsets = slots // block_size, slots % block_size
    return keys[blocks, :, :, offsets], values[blocks, :, offsets, :]


def write_tokens(layer_cache: torch.Tensor, slots: torch.Tensor, key: torch.Tensor,
                 value: torch.Tensor) -> None:
    keys, values = key_value_views(layer_cache)
    block_size = layer_cache.shape[2]
    blocks, offsets = slots // block_size, slots % block_size
    keys[blocks, :, :, offsets] = key.to(layer_cache.dtype)
    values[blocks, :, offsets, :] = value.to(layer_cache.dtype)


def relocate_kv_cpu(layer_cache: torch.Tensor, src_slots: torch.Tensor, dst_slots: torch.Tensor,
                    pos_delta: torch.Tensor, cos_sin_cache: torch.Tensor, is_neox: bool) -> None:
    """``relocate_kv`` (same meaning and checks) on one layer of vLLM-CPU's cache, in place."""
    block_size = layer_cache.shape[2]
    touched = torch.unique(torch.cat([src_slots, dst_slots]) // block_size)
    remap = {int(block): index for index, block in enumerate(touched.tolist())}

    def local(slots: torch.Tensor) -> torch.Tensor:
        blocks = torch.tensor([remap[int(b)] for b in (slots // block_size).tolist()], dtype=torch.int64)
        return blocks * block_size + slots % block_size

    keys, values = key_value_views(layer_cache)
    # Paged staging copies of the touched blocks: [blocks, block_size, heads, head_size].
    key_pages = keys[touched].permute(0, 3, 1, 2).contiguous()
    value_pages = values[touched].permute(0, 2, 1, 3).contiguous()
    relocate_kv(key_pages, value_pages, local(src_slots), local(dst_slots), pos_delta,
                cos_sin_cache, is_neox, impl="reference")
    keys[touched] = key_pages.permute(0, 2, 3, 1)
    values[touched] = value_pages.permute(0, 2, 1, 3)
