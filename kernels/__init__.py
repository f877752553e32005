"""KV-cache kernels for ARC (installed as ``arc_vllm.kernels``; the folder is ``kernels/``).

``relocate_kv`` places the keys and values of a span computed at positions p at positions
p + delta: V is copied, K is copied and rotated by delta (RoPE), in vLLM's paged cache layout.
Three implementations behind one API: a plain torch reference (always), Triton (on a GPU, or
on CPU under ``TRITON_INTERPRET=1``), and CUDA from the top-level ``csrc/`` (built lazily on a GPU).

Run ``python -m arc_vllm.kernels`` to list the implementations available here.
"""

from arc_vllm.kernels.relocate_kv import available_implementations, relocate_kv
from arc_vllm.kernels.rope import compute_cos_sin_cache

__all__ = ["relocate_kv", "available_implementations", "compute_cos_sin_cache"]
