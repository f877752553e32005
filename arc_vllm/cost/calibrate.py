"""Measure the machine the roofline is instantiated with: copy bandwidth, matmul throughput
and memory capacity, on the device the engine runs on (CPU here, a GPU when there is one).

    python -m arc_vllm.cost.calibrate            # prints the figures as JSON

Copy bandwidth counts a read and a write of every byte of a buffer far larger than any cache
(``dst.copy_(src)``: 2 x size bytes), best of several runs. Matmul throughput is a square
matmul in the dtype the model runs in (bf16 by default: on a CPU without bf16 units that is
slower than fp32, and it is what the engine pays), 2 n^3 FLOPs, best of several runs, n
growing to 2,048 while a product stays quick (a bf16 product on an AVX2-only CPU runs at under
1 GFLOP/s: minutes at 2,048). The
best run is the peak the roofline assumes; the engine's own steps are compared against it.
Beside them, for reading the comparison: the weight bandwidth one token through a bf16
``F.linear`` reaches (what decode kernels can attain, as opposed to a plain copy).
"""

from __future__ import annotations

import json
import os
import time


def device_name(device: str) -> str:
    import torch

    if device.startswith("cuda"):
        return torch.cuda.get_device_name(device)
    import platform

    return f"{platform.processor() or platform.machine()} CPU, {torch.get_num_threads()} threads"


def synchronize(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize(device)


def best_seconds(run, device: str, repeats: int) -> float:
    run()  # warm-up: page faults, kernel selection
    synchronize(device)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        synchronize(device)
        best = min(best, time.perf_counter() - start)
    return best


def copy_bytes_per_s(device: str = "cpu", size_bytes: int = 512 << 20, repeats: int = 5) -> float:
    import torch

    source = torch.ones(size_bytes // 4, dtype=torch.float32, device=device)
    target = torch.empty_like(source)
    seconds = best_seconds(lambda: target.copy_(source), device, repeats)
    return 2 * source.numel() * 4 / seconds


# The smallest square matmul timed, and the time one product may take before the matrix stops
# growing toward ``size``: a CPU without bf16 units multiplies bf16 at well under 1 GFLOP/s (a
# 2,048 product took 168 s on an AVX2-only class), a rate a 256-512 product already shows.
FIRST_MATMUL_SIZE = 256
MATMUL_SECONDS = 0.1


def flops_per_s(device: str = "cpu", size: int = 2048, dtype: str = "bfloat16",
                repeats: int = 3) -> float:
    """Peak matmul FLOPs per second: square products from ``FIRST_MATMUL_SIZE`` up, doubling
    to ``size`` while one takes under ``MATMUL_SECONDS`` (best of ``repeats`` at each size)."""
    import torch

    n = min(FIRST_MATMUL_SIZE, size)
    while True:
        left = torch.randn(n, n, device=device).to(getattr(torch, dtype))
        right = torch.randn(n, n, device=device).to(getattr(torch, dtype))
        seconds = best_seconds(lambda: torch.matmul(left, right), device, repeats)
        if n >= size or seconds > MATMUL_SECONDS:
            return 2 * n ** 3 / seconds
        n = min(2 * n, size)


def linear_bytes_per_s(device: str = "cpu", size: int = 8192, dtype: str = "bfloat16",
                       repeats: int = 5) -> float:
    """Weight bytes per second of one token through ``F.linear`` over a matrix far larger than
    any cache: the bandwidth a decode step's weight reads can reach with torch's own kernels
    (often well under the copy bandwidth on a CPU)."""
    import torch
    import torch.nn.functional as F

    weight = torch.randn(size, size, device=device).to(getattr(torch, dtype))
    token = torch.randn(1, size, device=device).to(getattr(torch, dtype))
    seconds = best_seconds(lambda: F.linear(token, weight), device, repeats)
    return weight.numel() * weight.element_size() / seconds


def memory_bytes(device: str = "cpu") -> int:
    import torch

    if device.startswith("cuda"):
        return torch.cuda.get_device_properties(device).total_memory
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def peak_memory_bytes(device: str = "cpu") -> int:
    """Peak memory of this process: the GPU's reserved bytes, or on CPU the peak resident set
    (the profiled engine runs in this process)."""
    import torch

    if device.startswith("cuda"):
        return torch.cuda.max_memory_reserved(device)
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def calibrate(device: str = "cpu", dtype: str = "bfloat16", copy_size_bytes: int = 512 << 20,
              matmul_size: int = 2048) -> dict:
    return {"device": device_name(device), "dtype": dtype,
            "copy_bytes_per_s": copy_bytes_per_s(device, copy_size_bytes),
            "flops_per_s": flops_per_s(device, matmul_size, dtype),
            "linear_bytes_per_s": linear_bytes_per_s(device, dtype=dtype),
            "memory_bytes": memory_bytes(device)}


if __name__ == "__main__":
    print(json.dumps(calibrate("cuda" if os.environ.get("ARC_DEVICE") == "cuda" else "cpu"), indent=1))
