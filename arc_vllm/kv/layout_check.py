"""Which KV layout the engine chose, and a start-up check that the KV-reuse connector writes it.

KV reuse writes K and V straight into vLLM's cache, so a layout misread is silent: the outputs
are just wrong. vLLM-CPU picks a block layout per attention ISA (``layer.isa``: ``vec``,
``vec16``, ``amx``); a GPU backend uses the paged ``[2, blocks, block_size, heads, head_size]``.
``engine_layout`` reads the engine's choice for a layer, and refuses (``UnsupportedKVLayout``,
naming the ISA or backend, the dtype and the model) what ``kernels/cpu_layout.py`` and
``kernels/kv_layout.py`` do not implement: another ISA, a quantised (fp8) KV cache, MLA.

``check_layout`` is the connector's self-check (worker side, when the caches are registered,
before any request): on a few scratch blocks of the real cache it

1. has the engine write a span of K/V with keys rotated to positions 0..n (vLLM's own
   rotary embedding and its own ``reshape_and_cache`` kernel for the layer's ISA or backend),
2. has the engine write the same span rotated to positions delta..delta+n, and keeps those
   blocks as the truth,
3. reads the first copy back and ``fill``s it at delta..delta+n as a claim would (V copied,
   K re-rotated by delta), and
4. compares the blocks with the engine's own: V bit-exact, K within the dtype's rounding.

Then it puts the scratch blocks back as they were. Layer 0 of a real model computes K from the
token and its position only, so this is the same comparison as running the model at two
positions, without a forward pass. A mismatch means the connector would serve garbled KV: it
disables reuse (``kv/connector_worker.py``).

Run ``python -m arc_vllm.kv.layout_check`` to check every CPU layout against vLLM's
own kernel on this machine, and that a wrong one is caught.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass

import torch

from arc_vllm.kernels.cpu_layout import CPU_LAYOUTS, UnsupportedKVLayout
from arc_vllm.kernels.kv_layout import PAGED, LayerCache, slots_of

logger = logging.getLogger(__name__)

DELTA = 37  # the move: not a multiple of 16 or 32, so every in-block grouping is crossed


@dataclass
class LayoutCheck:
    ok: bool
    layout: str  # what the connector writes
    engine_layout: str  # what the engine chose
    dtype: str
    key_error: float  # max |K filled - K the engine wrote|, relative to max |K|
    value_equal: bool

    def summary(self) -> str:
        verdict = "passed" if self.ok else "FAILED"
        return (f"KV-reuse layout check {verdict}: writes {self.layout}, engine uses {self.engine_layout}, "
                f"{self.dtype}, relative K error {self.key_error:.2e}, V equal {self.value_equal}")

    def to_dict(self) -> dict:
        return asdict(self)


def engine_layout(layer_name: str, tensor: torch.Tensor, vllm_config) -> str:
    """The layout the engine uses for ``layer_name``'s cache, or ``UnsupportedKVLayout``."""
    model = vllm_config.model_config
    cache_dtype = vllm_config.cache_config.cache_dtype
    where = f"model {model.model}, dtype {str(model.dtype).replace('torch.', '')}, KV cache dtype {cache_dtype}"
    if getattr(model, "use_mla", False):
        raise UnsupportedKVLayout(f"--arc-kv-reuse does not support MLA KV caches ({where}); "
                                  "serve without --arc-kv-reuse")
    if cache_dtype != "auto":
        raise UnsupportedKVLayout(f"--arc-kv-reuse does not support a quantised KV cache ({where}); "
                                  "serve without --arc-kv-reuse or with --kv-cache-dtype auto")
    if tensor.device.type == "cpu":
        layer = vllm_config.compilation_config.static_forward_context.get(layer_name)
        isa = getattr(layer, "isa", None)
        if isa not in CPU_LAYOUTS or tensor.dim() != 4:
            raise UnsupportedKVLayout(f"--arc-kv-reuse does not know vLLM-CPU attention ISA {isa!r} "
                                      f"(cache shape {tuple(tensor.shape)}; {where}); known: "
                                      f"{', '.join(CPU_LAYOUTS)}; serve without --arc-kv-reuse")
        return isa
    if tensor.dim() == 5 and tensor.shape[0] == 2:
        return PAGED
    raise UnsupportedKVLayout(f"--arc-kv-reuse knows the GPU paged layout [2, blocks, block_size, heads, "
                              f"head_size]; this backend's cache is {tuple(tensor.shape)} ({where}); "
                              "serve without --arc-kv-reuse")


def engine_write(tensor: torch.Tensor, layout: str, key: torch.Tensor, value: torch.Tensor,
                 slots: torch.Tensor) -> None:
    """Write ``key``/``value`` ``[n, heads, head_size]`` at ``slots`` with vLLM's own kernel."""
    from vllm import _custom_ops as ops

    if layout == PAGED:
        scale = torch.ones((), dtype=torch.float32, device=tensor.device)
        ops.reshape_and_cache_flash(key, value, tensor[0], tensor[1], slots, "auto", scale, scale)
        return
    # As vLLM's CPU attention does: the slab viewed as [blocks, heads, 2 * block, head], K half first.
    blocks, heads, block_size, twice = tensor.shape
    key_cache, value_cache = tensor.view(blocks, heads, 2 * block_size, twice // 2).chunk(2, dim=2)
    ops.cpu_attn_reshape_and_cache(key, value, key_cache, value_cache, slots, layout)


def check_layout(tensor: torch.Tensor, engine_choice: str, layout: str, rope, is_neox: bool,
                 write=engine_write) -> LayoutCheck:
    """Fill a span moved by ``DELTA`` in ``layout`` and compare with what the engine (which
    uses ``engine_choice``) writes there itself. ``rope`` is vLLM's rotary embedding for the
    model; ``write`` the engine's write (a parameter only so tests can see it called)."""
    layer = LayerCache(tensor, layout)
    block_size, device = layer.block_size, tensor.device
    block_axis = 1 if layout == PAGED else 0
    num_blocks = tensor.shape[block_axis]
    span = block_size + 21  # crosses a block boundary at both positions
    saved_count = -(-span // block_size)
    moved_count = -(-(DELTA + span) // block_size)
    if num_blocks < saved_count + moved_count + 1:
        raise ValueError(f"the KV cache has {num_blocks} blocks; the layout check needs "
                         f"{saved_count + moved_count + 1}")
    # The last blocks of the cache: free at start-up (nothing is scheduled yet), restored after.
    scratch = list(range(num_blocks - saved_count - moved_count, num_blocks))
    saved_blocks, moved_blocks = scratch[:saved_count], scratch[saved_count:]
    backup = tensor.index_select(block_axis, torch.tensor(scratch, device=device)).clone()
    try:
        heads, head_size = _heads(tensor, layout)
        generator = torch.Generator().manual_seed(0)
        raw = torch.randn(span, heads * head_size, generator=generator)
        value = torch.randn(span, heads, head_size, generator=generator).to(tensor.dtype).to(device)
        positions = torch.arange(span)

        def rotated(start: int) -> torch.Tensor:
            query = torch.zeros(span, heads * head_size)
            _, key = rope.forward_native((positions + start).to(rope.cos_sin_cache.device),
                                         query.to(rope.cos_sin_cache.device), raw.clone().to(rope.cos_sin_cache.device))
            return key.view(span, heads, head_size).to(tensor.dtype).to(device)

        saved_slots = slots_of(saved_blocks, 0, span, block_size).to(device)
        moved_slots = slots_of(moved_blocks, DELTA, span, block_size).to(device)
        _zero(tensor, block_axis, scratch)
        write(tensor, engine_choice, rotated(0), value, saved_slots)
        write(tensor, engine_choice, rotated(DELTA), value, moved_slots)
        truth = tensor.index_select(block_axis, torch.tensor(moved_blocks, device=device)).clone()
        _zero(tensor, block_axis, moved_blocks)
        key, held_value = layer.read(saved_slots)
        layer.fill(key, held_value, [(DELTA, 0, span)], moved_blocks,
                   rope.cos_sin_cache.float().to(device), is_neox)
        ours = tensor.index_select(block_axis, torch.tensor(moved_blocks, device=device))
        truth_key, truth_value = _halves(truth, layout)
        our_key, our_value = _halves(ours, layout)
        scale = truth_key.float().abs().max().item() or 1.0
        key_error = (our_key.float() - truth_key.float()).abs().max().item() / scale
        value_equal = torch.equal(our_value, truth_value)
    finally:
        tensor.index_copy_(block_axis, torch.tensor(scratch, device=device), backup)
    # float32 agrees to rounding; 16-bit dtypes round the re-rotated key once more (2^-8 each).
    tolerance = 1e-4 if tensor.dtype == torch.float32 else 2 ** -5
    return LayoutCheck(ok=value_equal and key_error <= tolerance, layout=layout, engine_layout=engine_choice,
                       dtype=str(tensor.dtype).replace("torch.", ""), key_error=key_error,
                       value_equal=value_equal)


def _heads(tensor: torch.Tensor, layout: str) -> tuple[int, int]:
    if layout == PAGED:
        return tensor.shape[3], tensor.shape[4]
    return tensor.shape[1], tensor.shape[3] // 2


def _zero(tensor: torch.Tensor, block_axis: int, blocks: list[int]) -> None:
    index = torch.tensor(blocks, device=tensor.device)
    tensor.index_fill_(block_axis, index, 0)


def _halves(blocks: torch.Tensor, layout: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The K and V parts of some blocks, raw (in whatever order the layout keeps them)."""
    if layout == PAGED:
        return blocks[0], blocks[1]
    half = blocks.shape[-1] // 2 * blocks.shape[-2]
    flat = blocks.reshape(blocks.shape[0], blocks.shape[1], -1)
    return flat[..., :half], flat[..., half:]


if __name__ == "__main__":
    from vllm.config import VllmConfig, set_current_vllm_config
    from vllm.model_executor.layers.rotary_embedding import get_rope

    with set_current_vllm_config(VllmConfig()):
        rope = get_rope(64, max_position=2048, is_neox_style=True, dtype=torch.float32)
    for dtype in (torch.float32, torch.bfloat16):
        for isa in CPU_LAYOUTS:
            for written in CPU_LAYOUTS:
                cache = torch.randn(8, 3, 32, 128).to(dtype)
                before = cache.clone()
                result = check_layout(cache, isa, written, rope, is_neox=True)
                print(f"engine {isa:5s} connector {written:5s} {str(dtype):15s} -> ok={result.ok} "
                      f"K error {result.key_error:.1e} V equal {result.value_equal}; "
                      f"cache restored: {torch.equal(cache, before)}")
