"""relocate_kv: the checked entry point that picks an implementation.

    relocate_kv(key_cache, value_cache, src_slots, dst_slots, pos_delta, cos_sin_cache,
                is_neox, impl="auto")

- caches ``[num_blocks, block_size, num_kv_heads, head_size]``, same shape, dtype (float32,
  float16, bfloat16) and device, last dimension contiguous; slot = block * block_size + offset;
- ``src_slots``, ``dst_slots``, ``pos_delta``: int64, one entry per token; ``pos_delta`` may be
  negative; ``cos_sin_cache`` ``[max_position, rotary_dim]`` in vLLM's layout with
  rotary_dim <= head_size (partial rotary) and |pos_delta| < max_position;
- in place. Destination slots must be distinct. Sources and destinations may overlap (a
  compaction shifting retained text left): when a slot written by one token is read by
  another, the sources are first gathered into a staging buffer, which costs one extra
  read and write of the moved bytes; a token rotated in place (src == dst) needs none.
- everything is checked with a clear ``ValueError`` before any write. The value checks (slot
  ranges, distinct destinations, |delta|, overlap) read the index tensors, which on a GPU
  costs a few small kernels and a sync, tens of microseconds. A caller whose slots come
  from the engine's own block tables may pass ``trusted=True`` to skip them; it then
  promises valid, distinct destinations and no slot both written and read by different
  tokens (in place, src == dst, is fine). Shapes, dtypes and devices are always checked.

``impl``: ``reference`` (torch), ``triton``, ``cuda``, or ``auto`` (the fastest available:
cuda, then triton on a GPU; the reference on CPU). Run ``python -m arc_vllm.kernels``.
"""

from __future__ import annotations

import os

import torch

from arc_vllm.kernels.relocate_kv_reference import relocate_kv_reference

DTYPES = (torch.float32, torch.float16, torch.bfloat16)
IMPLEMENTATIONS = ("reference", "triton", "cuda")


def _triton_usable(device: torch.device) -> bool:
    try:
        import triton  # noqa: F401
    except ImportError:
        return False
    return device.type == "cuda" or os.environ.get("TRITON_INTERPRET") == "1"


def available_implementations(device: torch.device | str | None = None) -> list[str]:
    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    found = ["reference"]
    if _triton_usable(device):
        found.append("triton")
    if device.type == "cuda":
        from arc_vllm.kernels import relocate_kv_cuda

        if relocate_kv_cuda.available():
            found.append("cuda")
    return found


def _check(key_cache, value_cache, src_slots, dst_slots, pos_delta, cos_sin_cache,
           values: bool = True) -> None:
    tensors = dict(key_cache=key_cache, value_cache=value_cache, src_slots=src_slots,
                   dst_slots=dst_slots, pos_delta=pos_delta, cos_sin_cache=cos_sin_cache)
    for name, tensor in tensors.items():
        if not isinstance(tensor, torch.Tensor):
            raise ValueError(f"{name} must be a torch.Tensor, not {type(tensor).__name__}")
    if key_cache.dim() != 4:
        raise ValueError(f"key_cache must be [num_blocks, block_size, num_kv_heads, head_size], "
                         f"got shape {tuple(key_cache.shape)}")
    if value_cache.shape != key_cache.shape:
        raise ValueError(f"value_cache shape {tuple(value_cache.shape)} differs from key_cache "
                         f"shape {tuple(key_cache.shape)}")
    if key_cache.dtype not in DTYPES or value_cache.dtype != key_cache.dtype:
        raise ValueError(f"caches must share one dtype of float32/float16/bfloat16, got "
                         f"{key_cache.dtype} and {value_cache.dtype}")
    devices = {name: tensor.device for name, tensor in tensors.items()}
    if len(set(devices.values())) != 1:
        raise ValueError(f"all tensors must be on one device, got {devices}")
    if key_cache.stride(3) != 1 or value_cache.stride(3) != 1:
        raise ValueError("the caches' last dimension (head_size) must be contiguous")
    for name in ("src_slots", "dst_slots", "pos_delta"):
        tensor = tensors[name]
        if tensor.dtype != torch.int64 or tensor.dim() != 1:
            raise ValueError(f"{name} must be a 1-D int64 tensor, got {tensor.dtype} "
                             f"{tuple(tensor.shape)}")
    if not src_slots.numel() == dst_slots.numel() == pos_delta.numel():
        raise ValueError(f"src_slots, dst_slots and pos_delta must have one entry per token, got "
                         f"{src_slots.numel()}, {dst_slots.numel()}, {pos_delta.numel()}")
    head_size = key_cache.shape[3]
    if cos_sin_cache.dim() != 2 or not cos_sin_cache.is_floating_point():
        raise ValueError(f"cos_sin_cache must be a float [max_position, rotary_dim] tensor, got "
                         f"{cos_sin_cache.dtype} {tuple(cos_sin_cache.shape)}")
    rotary_dim = cos_sin_cache.shape[1]
    if rotary_dim % 2 or not 0 < rotary_dim <= head_size:
        raise ValueError(f"rotary_dim (cos_sin_cache.shape[1]) = {rotary_dim} must be even and "
                         f"in 1..head_size = {head_size}")
    if not cos_sin_cache.is_contiguous():
        raise ValueError("cos_sin_cache must be contiguous")
    if src_slots.numel() == 0 or not values:
        return
    num_slots = key_cache.shape[0] * key_cache.shape[1]
    for name in ("src_slots", "dst_slots"):
        low, high = int(tensors[name].min()), int(tensors[name].max())
        if low < 0 or high >= num_slots:
            raise ValueError(f"{name} must lie in [0, {num_slots}) (num_blocks * block_size), "
                             f"got values in [{low}, {high}]")
    largest = int(pos_delta.abs().max())
    if largest >= cos_sin_cache.shape[0]:
        raise ValueError(f"|pos_delta| up to {largest} needs cos_sin_cache rows up to that "
                         f"position, but it has {cos_sin_cache.shape[0]}")
    if torch.unique(dst_slots).numel() != dst_slots.numel():
        raise ValueError("dst_slots must be distinct: two tokens would write one slot")


def _needs_staging(src_slots: torch.Tensor, dst_slots: torch.Tensor) -> bool:
    """True when some token would read a slot that another token writes."""
    written_and_read = torch.isin(dst_slots, src_slots)
    if not bool(written_and_read.any()):
        return False
    # A token rotated in place reads and writes only its own slot; that is safe as long as
    # no other token reads the same slot.
    in_place = src_slots == dst_slots
    if bool((written_and_read & ~in_place).any()):
        return True
    return torch.unique(src_slots).numel() != src_slots.numel()


def relocate_kv(key_cache, value_cache, src_slots, dst_slots, pos_delta, cos_sin_cache,
                is_neox: bool, impl: str = "auto", trusted: bool = False) -> str:
    """Move a span's KV to new slots and positions, in place; returns the implementation used."""
    if impl not in ("auto", *IMPLEMENTATIONS):
        raise ValueError(f"impl={impl!r}: use auto, {', '.join(IMPLEMENTATIONS)}")
    _check(key_cache, value_cache, src_slots, dst_slots, pos_delta, cos_sin_cache,
           values=not trusted)
    available = available_implementations(key_cache.device)
    if impl == "auto":
        # On CPU Triton only runs interpreted, far slower than torch: auto means reference.
        impl = available[-1] if key_cache.device.type == "cuda" else "reference"
    elif impl not in available:
        raise ValueError(f"impl={impl!r} is not available on {key_cache.device} "
                         f"(available: {', '.join(available)})")
    if src_slots.numel() == 0:
        return impl
    if impl == "reference":
        relocate_kv_reference(key_cache, value_cache, src_slots, dst_slots, pos_delta,
                              cos_sin_cache, is_neox)
        return impl
    src_key, src_value, src_index = key_cache, value_cache, src_slots
    if not trusted and _needs_staging(src_slots, dst_slots):
        block_size = key_cache.shape[1]
        blocks, offsets = src_slots // block_size, src_slots % block_size
        src_key = key_cache[blocks, offsets].unsqueeze(1)      # [n, 1, heads, head_size]
        src_value = value_cache[blocks, offsets].unsqueeze(1)
        src_index = torch.arange(src_slots.numel(), device=src_slots.device)
    if impl == "triton":
        from arc_vllm.kernels.relocate_kv_triton import launch
    else:
        from arc_vllm.kernels.relocate_kv_cuda import launch
    launch(src_key, src_value, src_index, key_cache, value_cache, dst_slots, pos_delta,
           cos_sin_cache, is_neox)
    return impl
