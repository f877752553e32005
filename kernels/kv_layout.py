"""One layer of vLLM's KV cache as the KV-reuse connector sees it: read, write and re-rotate slots.

vLLM hands a connector each attention layer's cache tensor (``register_kv_caches``). Two
layouts occur:

- vLLM-CPU: ``[num_blocks, num_kv_heads, block_size, 2 * head_size]``, K then V per (block,
  head) slab, placed inside the slab as the layer's attention ISA wants (``vec``, ``vec16``,
  ``amx``; see ``cpu_layout.py``): the caller names the ISA the engine chose;
- GPU (flash-attn and Triton backends): ``[2, num_blocks, block_size, num_kv_heads, head_size]``,
  K then V, each the paged layout ``relocate_kv`` takes.

``LayerCache`` reads K and V of slots (``[n, heads, head_size]``), writes them, and rotates
written keys in place by a position delta: ``relocate_kv`` with source = destination, the
Triton/CUDA kernel on a GPU, the torch reference on CPU. ``fill`` is what the KV-reuse
connector (``arc_vllm/kv/connector.py``) does per layer: saved K and V of a past
prompt, piece by piece, into a new request's slots, keys rotated by the move. Slot = block *
block_size + offset.

Run ``python -m arc_vllm.kernels.kv_layout`` for a round trip on both layouts (CPU).
"""

from __future__ import annotations

import torch

from arc_vllm.kernels.cpu_layout import (CPU_LAYOUTS, UnsupportedKVLayout, read_tokens,
                                          relocate_kv_cpu, slab_offsets, write_tokens)
from arc_vllm.kernels.relocate_kv import relocate_kv

PAGED = "paged"  # the GPU backends' [2, blocks, block_size, heads, head_size]


class LayerCache:
    """One layer's cache in a named layout: ``"paged"`` (GPU), or the vLLM-CPU attention ISA
    whose slab layout it holds (``"vec"``, ``"vec16"``, ``"amx"``). There is no default for a CPU
    cache: the layout is what the engine chose, and a guess is how KV gets silently garbled."""

    def __init__(self, tensor: torch.Tensor, layout: str, impl: str = "auto"):
        self.tensor = tensor
        self.layout = layout
        self.impl = impl  # relocate_kv's implementation for the GPU layout
        self.cpu_layout = layout != PAGED
        if self.cpu_layout:
            if layout not in CPU_LAYOUTS:
                raise UnsupportedKVLayout(f"no KV layout {layout!r} (known: {PAGED}, {', '.join(CPU_LAYOUTS)})")
            if tensor.dim() != 4:
                raise ValueError(f"a CPU KV cache is [blocks, heads, block_size, 2 * head_size]; "
                                 f"got {tuple(tensor.shape)}")
            self.block_size = tensor.shape[2]
            slab_offsets(layout, self.block_size, tensor.shape[3] // 2, tensor.element_size())  # checks sizes
        else:
            if tensor.dim() != 5 or tensor.shape[0] != 2:
                raise ValueError(f"a paged KV cache is [2, blocks, block_size, heads, head_size]; "
                                 f"got {tuple(tensor.shape)}")
            self.block_size = tensor.shape[2]

    def _paged(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self.tensor[0], self.tensor[1]

    def read(self, slots: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Copies of K and V at ``slots``, each ``[n, heads, head_size]``."""
        if self.cpu_layout:
            key, value = read_tokens(self.tensor, slots, self.layout)
            return key.clone(), value.clone()
        keys, values = self._paged()
        heads, head_size = keys.shape[2], keys.shape[3]
        return (keys.reshape(-1, heads, head_size)[slots].clone(),
                values.reshape(-1, heads, head_size)[slots].clone())

    def write(self, slots: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> None:
        if self.cpu_layout:
            write_tokens(self.tensor, slots, key, value, self.layout)
            return
        keys, values = self._paged()
        heads, head_size = keys.shape[2], keys.shape[3]
        keys.view(-1, heads, head_size)[slots] = key.to(keys.dtype)
        values.view(-1, heads, head_size)[slots] = value.to(values.dtype)

    def rotate(self, slots: torch.Tensor, pos_delta: torch.Tensor, cos_sin_cache: torch.Tensor,
               is_neox: bool) -> None:
        """Rotate the keys at ``slots`` by ``pos_delta`` (V unchanged), in place."""
        if self.cpu_layout:
            relocate_kv_cpu(self.tensor, slots, slots, pos_delta, cos_sin_cache, is_neox, self.layout)
            return
        keys, values = self._paged()
        relocate_kv(keys, values, slots, slots, pos_delta, cos_sin_cache, is_neox, impl=self.impl,
                    trusted=True)

    def fill(self, key: torch.Tensor, value: torch.Tensor, pieces: list[tuple[int, int, int]],
             block_ids: list[int], cos_sin_cache: torch.Tensor, is_neox: bool,
             origin: torch.Tensor | None = None) -> None:
        """Place saved K and V (``[rows, heads, head_size]``) into a request's slots: each piece
        ``(new position, row, length)`` is copied, and its keys rotated from the position each
        row was computed at (``origin[row]``; without ``origin``, the row itself) to the new one."""
        device = self.tensor.device
        rows = torch.cat([torch.arange(old, old + length) for _, old, length in pieces])
        slots = torch.cat([slots_of(block_ids, new, length, self.block_size)
                           for new, _, length in pieces]).to(device)
        positions = torch.cat([torch.arange(new, new + length) for new, _, length in pieces])
        delta = (positions - (origin[rows] if origin is not None else rows)).to(device)
        rows = rows.to(key.device)
        self.write(slots, key[rows].to(device), value[rows].to(device))
        self.rotate(slots, delta, cos_sin_cache, is_neox)


def slots_of(block_ids: list[int], start: int, length: int, block_size: int) -> torch.Tensor:
    """Slots of positions ``start .. start + length`` of a request with ``block_ids``."""
    positions = torch.arange(start, start + length)
    blocks = torch.tensor(block_ids, dtype=torch.int64)[positions // block_size]
    return blocks * block_size + positions % block_size


if __name__ == "__main__":
    from arc_vllm.kernels.rope import compute_cos_sin_cache, rotate

    torch.manual_seed(0)
    cos_sin = compute_cos_sin_cache(32, 256)
    for name, tensor in (("vec", torch.randn(6, 2, 32, 64)), ("amx", torch.randn(6, 2, 32, 64)),
                         (PAGED, torch.randn(2, 6, 16, 2, 32))):
        layer = LayerCache(tensor, name)
        slots = slots_of([4, 1, 3], 5, 30, layer.block_size)
        key, value = layer.read(slots)
        layer.write(slots, key, value)
        delta = torch.full((30,), 7, dtype=torch.int64)
        layer.rotate(slots, delta, cos_sin, is_neox=True)
        moved, same = layer.read(slots)
        error = (moved - rotate(key, delta, cos_sin, True)).abs().max().item()
        print(f"{name}: rotate in place max error {error:.2e}, V unchanged: {torch.equal(same, value)}")
