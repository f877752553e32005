"""Rotary position embedding pieces in vLLM's layout, as plain torch (the reference path).

``cos_sin_cache`` is ``[max_position, rotary_dim]``: the cosines of position * inv_freq in the
first half, the sines in the second, exactly as vLLM's ``RotaryEmbedding`` builds it. Rotating
an already rotated key by delta multiplies each pair by R(delta * freq); a negative delta
uses cos(|delta|) and -sin(|delta|), so the cache only needs non-negative positions.

Run ``python -m arc_vllm.kernels.rope`` for a round-trip check (rotate by d, then by -d).
"""

from __future__ import annotations

import torch


def compute_cos_sin_cache(rotary_dim: int, max_position: int, base: float = 10000.0,
                          dtype: torch.dtype = torch.float32, device=None) -> torch.Tensor:
    inv_freq = 1.0 / (base ** (torch.arange(0, rotary_dim, 2, dtype=torch.float) / rotary_dim))
    freqs = torch.einsum("i,j -> ij", torch.arange(max_position, dtype=torch.float), inv_freq)
    return torch.cat((freqs.cos(), freqs.sin()), dim=-1).to(dtype=dtype, device=device)


def rotate(keys: torch.Tensor, pos_delta: torch.Tensor, cos_sin_cache: torch.Tensor,
           is_neox: bool) -> torch.Tensor:
    """``keys`` [n, heads, head_size] rotated by ``pos_delta`` [n], in float32."""
    rotary_dim = cos_sin_cache.shape[1]
    half = rotary_dim // 2
    rows = cos_sin_cache[pos_delta.abs()].float()
    cos = rows[:, None, :half]
    sin = rows[:, None, half:] * torch.sign(pos_delta).float()[:, None, None]
    out = keys.float().clone()
    if is_neox:  # rotate-half: pairs (i, i + half)
        first, second = out[..., :half].clone(), out[..., half:rotary_dim].clone()
        out[..., :half] = first * cos - second * sin
        out[..., half:rotary_dim] = second * cos + first * sin
    else:  # GPT-J: interleaved pairs (2i, 2i + 1)
        even, odd = out[..., 0:rotary_dim:2].clone(), out[..., 1:rotary_dim:2].clone()
        out[..., 0:rotary_dim:2] = even * cos - odd * sin
        out[..., 1:rotary_dim:2] = odd * cos + even * sin
    return out


if __name__ == "__main__":
    cache = compute_cos_sin_cache(64, 4096)
    keys = torch.randn(5, 4, 128)
    delta = torch.tensor([3, -7, 100, 0, -4000])
    for neox in (True, False):
        back = rotate(rotate(keys, delta, cache, neox), -delta, cache, neox)
        print(f"neox={neox}: max |rotate(rotate(k, d), -d) - k| = {(back - keys).abs().max():.2e}")
