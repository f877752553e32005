"""relocate_kv as a Triton kernel: one program per token moves all heads of that token.

Each program loads the token's V row and stores it at the destination, and loads its K row
(and, for the rotary part, each element's rotation partner), rotates it in float32 by the
token's delta with cos/sin read from vLLM's cos_sin_cache, and stores it. The wrapper only
launches; shapes, dtypes, slots and overlaps are checked by ``relocate_kv``.

On a GPU this compiles; on CPU it runs under ``TRITON_INTERPRET=1`` (set before import; about
5 ms a program, so CPU tests move few tokens).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _relocate_kv_kernel(
    src_key, src_value, src_slots, src_block_size, src_stride_block, src_stride_offset,
    src_stride_head,
    dst_key, dst_value, dst_slots, dst_block_size, dst_stride_block, dst_stride_offset,
    dst_stride_head,
    pos_delta, cos_sin, cos_sin_stride, num_heads, head_size, rotary_dim,
    IS_NEOX: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_D: tl.constexpr,
):
    token = tl.program_id(0)
    src_slot = tl.load(src_slots + token)
    dst_slot = tl.load(dst_slots + token)
    delta = tl.load(pos_delta + token)
    src_base = (src_slot // src_block_size) * src_stride_block + (src_slot % src_block_size) * src_stride_offset
    dst_base = (dst_slot // dst_block_size) * dst_stride_block + (dst_slot % dst_block_size) * dst_stride_offset

    heads = tl.arange(0, BLOCK_H)[:, None]
    dims = tl.arange(0, BLOCK_D)[None, :]
    mask = (heads < num_heads) & (dims < head_size)
    src_rows = src_base + heads * src_stride_head
    dst_rows = dst_base + heads * dst_stride_head

    value = tl.load(src_value + src_rows + dims, mask=mask)
    tl.store(dst_value + dst_rows + dims, value, mask=mask)

    half = rotary_dim // 2
    if IS_NEOX:  # pairs (i, i + half)
        freq = tl.where(dims < half, dims, dims - half)
        partner = tl.where(dims < half, dims + half, dims - half)
        sign = tl.where(dims < half, -1.0, 1.0)
    else:  # GPT-J: pairs (2i, 2i + 1)
        freq = dims // 2
        partner = dims ^ 1
        sign = tl.where(dims % 2 == 0, -1.0, 1.0)
    rotary = dims < rotary_dim
    row = tl.abs(delta) * cos_sin_stride
    cos = tl.load(cos_sin + row + freq, mask=rotary, other=1.0).to(tl.float32)
    sin = tl.load(cos_sin + row + half + freq, mask=rotary, other=0.0).to(tl.float32)
    sin = tl.where(delta < 0, -sin, sin)
    key = tl.load(src_key + src_rows + dims, mask=mask, other=0.0).to(tl.float32)
    other = tl.load(src_key + src_rows + partner, mask=mask & rotary, other=0.0).to(tl.float32)
    rotated = key * cos + sign * other * sin
    tl.store(dst_key + dst_rows + dims, rotated.to(dst_key.dtype.element_ty), mask=mask)


def launch(src_key: torch.Tensor, src_value: torch.Tensor, src_slots: torch.Tensor,
           dst_key: torch.Tensor, dst_value: torch.Tensor, dst_slots: torch.Tensor,
           pos_delta: torch.Tensor, cos_sin_cache: torch.Tensor, is_neox: bool) -> None:
    """Sources and destinations are ``[blocks, block_size, heads, head_size]`` tensors
    (possibly the same ones) with a contiguous last dimension."""
    num_tokens = src_slots.numel()
    if num_tokens == 0:
        return
    num_heads, head_size = dst_key.shape[2], dst_key.shape[3]
    _relocate_kv_kernel[(num_tokens,)](
        src_key, src_value, src_slots, src_key.shape[1], src_key.stride(0), src_key.stride(1),
        src_key.stride(2),
        dst_key, dst_value, dst_slots, dst_key.shape[1], dst_key.stride(0), dst_key.stride(1),
        dst_key.stride(2),
        pos_delta, cos_sin_cache, cos_sin_cache.stride(0), num_heads, head_size,
        cos_sin_cache.shape[1],
        IS_NEOX=is_neox, BLOCK_H=triton.next_power_of_2(num_heads),
        BLOCK_D=triton.next_power_of_2(head_size),
    )
