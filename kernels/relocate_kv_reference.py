"""relocate_kv in plain torch: the reference every other implementation is tested against,
and the CPU path. Sources are gathered before anything is written, so any overlap between
source and destination slots is handled."""

from __future__ import annotations

import torch

from arc_vllm.kernels.rope import rotate


def relocate_kv_reference(key_cache: torch.Tensor, value_cache: torch.Tensor,
                          src_slots: torch.Tensor, dst_slots: torch.Tensor,
                          pos_delta: torch.Tensor, cos_sin_cache: torch.Tensor,
                          is_neox: bool) -> None:
    num_blocks, block_size = key_cache.shape[:2]
    src_block, src_offset = src_slots // block_size, src_slots % block_size
    dst_block, dst_offset = dst_slots // block_size, dst_slots % block_size
    keys = key_cache[src_block, src_offset]      # advanced indexing: a copy, not a view
    values = value_cache[src_block, src_offset]
    key_cache[dst_block, dst_offset] = rotate(keys, pos_delta, cos_sin_cache, is_neox).to(key_cache.dtype)
    value_cache[dst_block, dst_offset] = values
