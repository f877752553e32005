"""What the serving benchmarks share: the conversations they send, a session created over
HTTP, a server process's resident memory and a gauge off its /metrics, and where a
benchmark's JSON goes."""

from __future__ import annotations

import json
from pathlib import Path

from bench.results import write_results

TINY = "arc-tiny-llama (random weights, 2 layers)"
DEFAULT_OUT = "runs/bench/serving.json"


def out_path(out: str, name: str | None) -> Path:
    """Where a benchmark writes: ``--out`` as given, or the default folder's
    ``serving_NAME.json`` (``serving.json`` for the load and prefix benchmarks, ``name`` None)."""
    path = Path(out)
    if out == DEFAULT_OUT and name:
        path = path.with_name(f"serving_{name}.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def write(results: dict, out: str, name: str | None = None) -> Path:
    return write_results(results, out_path(out, name))


def tool_turn(session: int, index: int, lines: int):
    body = "".join(f"s{session} t{index} line {n}: ok {n * 31 % 97}\n" for n in range(lines))
    call = {"id": f"c{index}", "type": "function",
            "function": {"name": "cat", "arguments": json.dumps({"path": f"f{index}.log"})}}
    return [{"role": "assistant", "content": f"Step {index}.", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{index}", "content": body}]


async def create_session(client) -> dict:
    response = await client._client.post(str(client.base_url).replace("/v1/", "/v1/arc/sessions"))
    return response.json()


def resident_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def gauge(base: str, name: str) -> float:
    import urllib.request

    text = urllib.request.urlopen(base + "/metrics").read().decode()
    return sum(float(line.split()[-1]) for line in text.splitlines() if line.startswith(name + " ")
               or line.startswith(name + "{"))
