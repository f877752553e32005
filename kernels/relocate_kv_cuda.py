"""The CUDA implementation of relocate_kv (top-level ``csrc/``), registered as
``torch.ops.arc_vllm.relocate_kv`` and built lazily, once, the first time it is needed on a
machine with a GPU (cached under ``$ARC_VLLM_CACHE/torch_extensions``).

``csrc/relocate_kv.cu`` is plain CUDA with a C launcher; ``csrc/relocate_kv_binding.cpp`` is
the torch op. Neither needs a GPU to compile, so ``build_check()`` compiles both here (nvcc
for the kernel, the host compiler against this torch for the binding) as a check.

Run ``python -m arc_vllm.kernels.relocate_kv_cuda`` for the build check.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import warnings
from pathlib import Path

import torch

# Beside this module, so an installed package carries it (package data), not only a checkout.
# Installed: arc_vllm/kernels/csrc/ (package data); in a checkout: the top-level csrc/.
CSRC = next((folder for folder in (Path(__file__).resolve().parent / "csrc",
                                   Path(__file__).resolve().parent.parent / "csrc")
             if (folder / "relocate_kv.cu").exists()), Path(__file__).resolve().parent / "csrc")
SOURCES = [CSRC / "relocate_kv.cu", CSRC / "relocate_kv_binding.cpp"]


@functools.lru_cache(maxsize=1)
def _load() -> bool:
    from torch.utils.cpp_extension import load

    from arc_vllm.paths import cache_root

    build = cache_root() / "torch_extensions" / "relocate_kv"
    build.mkdir(parents=True, exist_ok=True)
    try:
        load(name="arc_vllm_relocate_kv", sources=[str(path) for path in SOURCES],
             build_directory=str(build), extra_cflags=["-O3", "-std=c++20"],
             extra_cuda_cflags=["-O3", "-std=c++17"], is_python_module=False, verbose=False)
    except Exception as error:  # a failed build leaves the other implementations usable
        warnings.warn(f"the CUDA relocate_kv did not build: {error}")
        return False
    return hasattr(torch.ops.arc_vllm, "relocate_kv")


def available() -> bool:
    return torch.cuda.is_available() and _load()


def launch(src_key, src_value, src_slots, dst_key, dst_value, dst_slots, pos_delta,
           cos_sin_cache, is_neox: bool) -> None:
    if not _load():
        raise RuntimeError("the CUDA relocate_kv is not built on this machine")
    stream = torch.cuda.current_stream(dst_key.device).cuda_stream
    torch.ops.arc_vllm.relocate_kv(src_key, src_value, src_slots, dst_key, dst_value, dst_slots,
                                   pos_delta, cos_sin_cache, is_neox, stream)


def build_check(out_dir: str | None = None) -> list[str]:
    """Compile both sources without linking or a GPU; return the object files. Raises
    ``RuntimeError`` with the compiler's output on failure."""
    nvcc = shutil.which("nvcc")
    compiler = shutil.which("c++") or shutil.which("g++")
    if not nvcc or not compiler:
        raise FileNotFoundError("the build check needs nvcc and a C++ compiler on PATH")
    out = Path(out_dir or tempfile.mkdtemp(prefix="arc-csrc-"))
    include = Path(torch.__file__).parent / "include"
    commands = [
        [nvcc, "-std=c++17", "-O3", "-gencode", "arch=compute_90,code=sm_90", "-c",
         str(SOURCES[0]), "-o", str(out / "relocate_kv.o")],
        [compiler, "-std=c++20", "-O2", "-fPIC", "-c", f"-I{include}",
         f"-I{include / 'torch' / 'csrc' / 'api' / 'include'}",
         f"-I{sysconfig.get_paths()['include']}", str(SOURCES[1]), "-o",
         str(out / "relocate_kv_binding.o")],
    ]
    for command in commands:
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} failed:\n{done.stderr[-4000:]}")
    return [str(out / "relocate_kv.o"), str(out / "relocate_kv_binding.o")]


if __name__ == "__main__":
    print("\n".join(build_check(sys.argv[1] if len(sys.argv) > 1 else None)))
