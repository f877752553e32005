"""One decode step in plain torch with the shapes of a spec'd model: its weight bytes and its KV
bytes, random values. For machines with torch but no vLLM (the lent GPU), and as the reference
path on CPU.

    python -m arc_vllm.cost.engine_torch --model Qwen3-8B --context 4096 --batch 4 [--steps N]

Per layer: a fused QKV projection, attention of one new token per sequence over ``context``
cached tokens (``scaled_dot_product_attention`` with grouped KV heads), the output
projection, and a gated MLP sized so that the layers hold the model's parameter count (the
embedding table folded in: it is read once a step as the LM head). Norms and the KV append are
left out (a few bytes per token). The step reads the same bytes as the model's decode step:
``M_w + batch * context * kv_b``. The ``__main__`` form runs ``--steps`` steps and prints the
median, so ``ncu``/``rocprofv3`` can wrap it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from arc_vllm.cost.roofline import Model


class TorchDecode:
    def __init__(self, model: Model, device: str = "cpu", dtype: str = "bfloat16", seed: int = 0):
        import torch

        self.model, self.device = model, device
        self.dtype = getattr(torch, dtype)
        torch.manual_seed(seed)
        self.hidden = model.attention_heads * model.head_size
        query, kv = model.attention_heads * model.head_size, model.kv_heads * model.head_size
        attention = self.hidden * (query + 2 * kv) + query * self.hidden
        self.intermediate = max(1, int((model.parameters / model.layers - attention) / (3 * self.hidden)))

        def weight(rows: int, columns: int):  # made on the device: 16 GB of weights for an 8B model
            return torch.randn(rows, columns, device=device, dtype=self.dtype) * 0.02

        self.layers = [{"qkv": weight(self.hidden, query + 2 * kv), "out": weight(query, self.hidden),
                        "gate_up": weight(self.hidden, 2 * self.intermediate),
                        "down": weight(self.intermediate, self.hidden)} for _ in range(model.layers)]
        self.cache = None

    @property
    def weight_bytes(self) -> int:
        return sum(w.numel() * w.element_size() for layer in self.layers for w in layer.values())

    def allocate(self, context: int, batch: int) -> None:
        import torch

        shape = (batch, self.model.kv_heads, context, self.model.head_size)
        self.cache = None  # the previous cell's KV is freed before the next is made
        self.cache = [(torch.randn(shape, device=self.device, dtype=self.dtype),
                       torch.randn(shape, device=self.device, dtype=self.dtype)) for _ in self.layers]

    def step(self, batch: int):
        import torch
        import torch.nn.functional as F

        model = self.model
        x = torch.randn(batch, self.hidden, device=self.device, dtype=self.dtype)
        query = model.attention_heads * model.head_size
        for layer, (keys, values) in zip(self.layers, self.cache):
            qkv = x @ layer["qkv"]
            q = qkv[:, :query].view(batch, model.attention_heads, 1, model.head_size)
            attended = F.scaled_dot_product_attention(q, keys, values, enable_gqa=True)
            x = x + attended.reshape(batch, query) @ layer["out"]
            gate, up = (x @ layer["gate_up"]).chunk(2, dim=-1)
            x = x + (F.silu(gate) * up) @ layer["down"]
        return x

    def time_steps(self, context: int, batch: int, steps: int = 5, nvtx: bool = False) -> list[float]:
        """Wall time of each step after a warm-up; with ``nvtx`` each timed step sits in an
        NVTX range named ``decode_step`` (what ``ncu --nvtx-include decode_step/`` counts)."""
        import contextlib

        import torch

        self.allocate(context, batch)
        cuda = self.device.startswith("cuda")
        self.step(batch)  # warm-up
        times = []
        for _ in range(steps):
            if cuda:
                torch.cuda.synchronize()
            marked = torch.cuda.nvtx.range("decode_step") if cuda and nvtx else contextlib.nullcontext()
            start = time.perf_counter()
            with marked:
                self.step(batch)
                if cuda:
                    torch.cuda.synchronize()
            times.append(time.perf_counter() - start)
        self.cache = None
        return times

    def decode_cell(self, context: int, batch: int, steps: int = 5, nvtx: bool = False) -> dict:
        times = self.time_steps(context, batch, steps, nvtx)
        return {"nominal_context": context, "batch": batch, "context_tokens": context,
                "measured_s": statistics.median(times), "step_times_s": times}

    # ---- the profiled-engine interface (cost/profile.py ``ProfiledEngine``) --------------------
    reads_counters = True  # the step is plain torch: ncu/rocprofv3 can wrap it
    max_prompt = None  # no real calls: --trace needs the vLLM engine

    def prefill_seconds(self, prompt_tokens: int) -> float | None:
        return None  # decode only

    def kv_bytes(self, cells: list[dict], model: Model) -> dict:
        return {"measured_bytes_per_token": model.kv_bytes_per_token,
                "model_bytes_per_token": model.kv_bytes_per_token,
                "note": "the torch step allocates exactly the model's KV shapes",
                "torch_weight_bytes": self.weight_bytes}

    def call_seconds(self, prompt_tokens: int, generated_tokens: int) -> float:
        raise NotImplementedError("--trace needs the vLLM engine (prefill and decode of real calls)")


def model_of(name: str) -> Model:
    from pathlib import Path

    return Model.from_folder(name) if Path(name).is_dir() else Model.named(name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="Qwen3-8B")
    parser.add_argument("--context", type=int, default=4096)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--device", default=None)
    parser.add_argument("--nvtx", action="store_true", help="mark each timed step for ncu")
    args = parser.parse_args(argv)
    import torch

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    probe = TorchDecode(model_of(args.model), device)
    print(json.dumps(probe.decode_cell(args.context, args.batch, args.steps, args.nvtx)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
