"""Bandwidth benchmark of relocate_kv against a plain device-to-device copy of the same bytes.

    .venv/bin/python bench/kernels.py [--max-mib 1024] [--dtype bfloat16] [--out runs/bench/kernels.json]

For payloads of 1 MiB up to --max-mib (K and V of the moved tokens together), on the GPU
when there is one (else the CPU): each available implementation relocates that many bytes
between disjoint slots of a paged cache ([blocks, 16, 8 heads, 128], neox RoPE, random
deltas), and a plain ``copy_`` moves the same bytes in the same run. Bytes moved count what
is read plus what is written (2 x payload); GB/s = bytes moved / median time of the trusted
call (slots validated once beforehand); the fully checked call's time is reported beside it.
Target on an
H200: >= 0.8 of copy bandwidth from 64 MiB on. On CPU the reference path is reported, and
the interpreted Triton path is left out (it measures the interpreter, not a kernel).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import torch

try:
    import arc_vllm.kernels  # noqa: F401  (installed: the normal case)
except ImportError:  # bench/gpu_check.sh runs from a bare checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from arc_vllm.kernels import available_implementations, compute_cos_sin_cache, relocate_kv  # noqa: E402
from results import write_results  # noqa: E402  (bench/results.py, beside this script)

HEADS, HEAD_SIZE, BLOCK_SIZE = 8, 128, 16


def timed(function, device: torch.device, repeats: int) -> float:
    """Median seconds of ``function`` after a warm-up."""
    function()
    samples = []
    for _ in range(repeats):
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            function()
            end.record()
            torch.cuda.synchronize()
            samples.append(start.elapsed_time(end) / 1000)
        else:
            began = time.perf_counter()
            function()
            samples.append(time.perf_counter() - began)
    return statistics.median(samples)


def bench_size(payload: int, dtype: torch.dtype, device: torch.device, impls: list[str],
               repeats: int) -> list[dict]:
    token_bytes = 2 * HEADS * HEAD_SIZE * torch.finfo(dtype).bits // 8  # K and V
    tokens = max(1, payload // token_bytes)
    blocks = -(-2 * tokens // BLOCK_SIZE) + 1
    generator = torch.Generator().manual_seed(tokens)
    key = torch.randn(blocks, BLOCK_SIZE, HEADS, HEAD_SIZE, dtype=dtype, device=device)
    value = torch.randn_like(key)
    order = torch.randperm(blocks * BLOCK_SIZE, generator=generator).to(device)
    src, dst = order[:tokens], order[tokens:2 * tokens]           # disjoint: no staging
    delta = torch.randint(-4000, 4000, (tokens,), generator=generator).to(device)
    cache = compute_cos_sin_cache(HEAD_SIZE, 4096, device=device)
    moved = 2 * tokens * token_bytes                                  # read + written
    copy_source = torch.empty(tokens * token_bytes, dtype=torch.uint8, device=device)
    copy_target = torch.empty_like(copy_source)
    copy_seconds = timed(lambda: copy_target.copy_(copy_source), device, repeats)
    rows = []
    for impl in impls:
        # The kernel's bandwidth: slots already validated (as the engine's block tables are).
        seconds = timed(lambda: relocate_kv(key, value, src, dst, delta, cache, True, impl=impl,
                                            trusted=True), device, repeats)
        # ...and the full checked call, which reads the index tensors first.
        checked = timed(lambda: relocate_kv(key, value, src, dst, delta, cache, True, impl=impl),
                        device, max(3, repeats // 4))
        rows.append({"impl": impl, "dtype": str(dtype).removeprefix("torch."), "tokens": tokens,
                     "payload_bytes": tokens * token_bytes, "bytes_moved": moved,
                     "time_ms": round(seconds * 1000, 4), "gb_s": round(moved / seconds / 1e9, 2),
                     "checked_time_ms": round(checked * 1000, 4),
                     "copy_time_ms": round(copy_seconds * 1000, 4),
                     "copy_gb_s": round(moved / copy_seconds / 1e9, 2),
                     "ratio_to_copy": round(copy_seconds / seconds, 3)})
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-mib", type=int, default=None,
                        help="largest payload (default 1024 on a GPU, 256 on CPU)")
    parser.add_argument("--dtype", default="bfloat16", choices=["float32", "float16", "bfloat16"])
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--out", default="runs/bench/kernels.json")
    args = parser.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dtype = getattr(torch, args.dtype)
    impls = available_implementations(device) if device.type == "cuda" else ["reference"]
    max_mib = args.max_mib or (1024 if device.type == "cuda" else 256)
    repeats = args.repeats or (20 if device.type == "cuda" else 3)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else f"CPU x{os.cpu_count()}"
    results = {"device": name, "torch": torch.__version__, "dtype": args.dtype,
               "layout": [BLOCK_SIZE, HEADS, HEAD_SIZE], "rows": []}
    print(f"{name}: {', '.join(impls)}; {args.dtype}; bytes moved = read + written")
    mib = 1
    while mib <= max_mib:
        for row in bench_size(mib * 2**20, dtype, device, impls, repeats):
            results["rows"].append(row)
            print(f"{mib:>5} MiB {row['impl']:>9}: {row['time_ms']:>10.3f} ms {row['gb_s']:>9.2f} GB/s"
                  f"   copy {row['copy_gb_s']:>9.2f} GB/s   ratio {row['ratio_to_copy']:.3f}"
                  f"   (checked call {row['checked_time_ms']:.3f} ms)")
        mib *= 4
    write_results(results, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
