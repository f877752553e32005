"""The paper's roofline model of decode HBM traffic and serving time, per method.

For each model call k with prompt length p_k and m_k generated tokens, the active context is
L_k = p_k + m_k / 2 (its mean over the decode) and

    decode bytes_k = m_k * (M_w / B + L_k * kv_b)
    B              = max(1, floor((HBM - M_w - scratch) / (mean_k L_k * kv_b)))
    T_decode       = sum_k decode bytes_k / peak bandwidth
    T_prefill      = sum_k prefill FLOPs_k / peak BF16 FLOP/s,
    prefill FLOPs_k = 2 * parameters * p_k + 2 * layers * p_k^2 * heads * head_size  (causal)

with M_w the weight bytes and kv_b = 2 * layers * kv_heads * head_size * dtype bytes the KV
bytes per token. A method's totals (every attempt's calls, summaries included) are divided by its number of
successful tasks (NaN without a success); savings and speedups are against a chosen
baseline method. Hardware and models are data
(``specs.json``).

Run ``python -m arc_vllm.cost.roofline`` for a two-method example on H200 / Qwen3-8B.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

SPECS = json.loads((Path(__file__).with_name("specs.json")).read_text())


def spec(kind: str, name: str) -> dict:
    """One entry of specs.json (``kind`` is "hardware" or "models"), or a clear error."""
    entries = SPECS[kind]
    if name not in entries:
        label = "hardware" if kind == "hardware" else "model"
        raise ValueError(f"unknown {label} {name!r}; known: {', '.join(entries)}")
    return entries[name]


@dataclass(frozen=True)
class Hardware:
    name: str
    hbm_bytes: float
    bandwidth_bytes_s: float
    flops: float

    @classmethod
    def named(cls, name: str) -> "Hardware":
        entry = spec("hardware", name)
        return cls(name, entry["hbm_gb"] * 1e9, entry["bandwidth_tb_s"] * 1e12, entry["bf16_tflops"] * 1e12)

    @classmethod
    def measured(cls, calibration: dict) -> "Hardware":
        """The machine as ``cost.calibrate`` measured it."""
        return cls(calibration["device"], calibration["memory_bytes"],
                   calibration["copy_bytes_per_s"], calibration["flops_per_s"])


@dataclass(frozen=True)
class Model:
    name: str
    parameters: float
    layers: int
    attention_heads: int
    kv_heads: int
    head_size: int
    dtype_bytes: int

    @classmethod
    def named(cls, name: str) -> "Model":
        entry = spec("models", name)
        return cls(name, entry["parameters"], entry["layers"], entry["attention_heads"],
                   entry["kv_heads"], entry["head_size"], entry["dtype_bytes"])

    @property
    def weight_bytes(self) -> float:
        return self.parameters * self.dtype_bytes

    @property
    def kv_bytes_per_token(self) -> int:
        return 2 * self.layers * self.kv_heads * self.head_size * self.dtype_bytes

    def prefill_flops(self, prompt_tokens: int) -> float:
        attention = 2 * self.layers * prompt_tokens ** 2 * self.attention_heads * self.head_size
        return 2 * self.parameters * prompt_tokens + attention

    @classmethod
    def from_folder(cls, folder: str | Path, dtype_bytes: int = 2) -> "Model":
        """A Hugging Face model folder: shapes from config.json, parameters counted from the
        safetensors headers (tied embeddings counted once, as they are read once a step)."""
        folder = Path(folder)
        config = json.loads((folder / "config.json").read_text())
        parameters = 0
        for path in folder.glob("*.safetensors"):
            with open(path, "rb") as handle:
                header = json.loads(handle.read(int.from_bytes(handle.read(8), "little")))
            parameters += sum(math.prod(entry["shape"]) for name, entry in header.items()
                              if name != "__metadata__")
        heads = config["num_attention_heads"]
        return cls(folder.name, float(parameters), config["num_hidden_layers"], heads,
                   config.get("num_key_value_heads", heads),
                   config.get("head_dim") or config["hidden_size"] // heads, dtype_bytes)


def decode_step_bytes(model: Model, context: float, batch: int) -> float:
    """Bytes one decode step reads: the weights once, each sequence's KV."""
    return model.weight_bytes + batch * context * model.kv_bytes_per_token


def decode_step_flops(model: Model, context: float, batch: int) -> float:
    """FLOPs of one decode step: 2 per parameter per token, and QK^T plus PV over the context."""
    return batch * (2 * model.parameters
                    + 4 * model.layers * model.attention_heads * model.head_size * context)


def decode_step_seconds(model: Model, hardware: Hardware, context: float, batch: int) -> dict:
    """The roofline of one decode step: the slower of moving its bytes and doing its FLOPs."""
    memory_s = decode_step_bytes(model, context, batch) / hardware.bandwidth_bytes_s
    compute_s = decode_step_flops(model, context, batch) / hardware.flops
    return {"predicted_s": max(memory_s, compute_s), "memory_s": memory_s, "compute_s": compute_s,
            "bound": "memory" if memory_s >= compute_s else "compute"}


def prefill_seconds(model: Model, hardware: Hardware, prompt_tokens: int) -> float:
    return max(model.prefill_flops(prompt_tokens) / hardware.flops,
               model.weight_bytes / hardware.bandwidth_bytes_s)


@dataclass(frozen=True)
class Call:
    prompt_tokens: int
    generated_tokens: int

    @property
    def context(self) -> float:
        return self.prompt_tokens + self.generated_tokens / 2


def batch_size(calls: list[Call], model: Model, hardware: Hardware, scratch_bytes: float) -> int:
    """B: how many requests of the mean context fit beside the weights."""
    if not calls:
        return 1
    mean_context = sum(call.context for call in calls) / len(calls)
    free = hardware.hbm_bytes - model.weight_bytes - scratch_bytes
    return max(1, math.floor(free / (mean_context * model.kv_bytes_per_token)))


def roofline(calls: list[Call], successes: int, model: Model, hardware: Hardware,
             scratch_bytes: float = 0.0) -> dict:
    """Totals and per-success figures for one method's calls."""
    batch = batch_size(calls, model, hardware, scratch_bytes)
    decode_bytes = sum(call.generated_tokens * (model.weight_bytes / batch
                                                + call.context * model.kv_bytes_per_token)
                       for call in calls)
    prefill_flops = sum(model.prefill_flops(call.prompt_tokens) for call in calls)
    decode_s = decode_bytes / hardware.bandwidth_bytes_s
    prefill_s = prefill_flops / hardware.flops
    per = successes or math.nan  # no success: the per-success figures are undefined (NaN)
    return {"model": model.name, "hardware": hardware.name, "calls": len(calls),
            "successes": successes, "batch_size": batch, "decode_bytes": decode_bytes,
            "prefill_flops": prefill_flops, "decode_s": decode_s, "prefill_s": prefill_s,
            "total_s": decode_s + prefill_s, "decode_tb_per_success": decode_bytes / per / 1e12,
            "total_s_per_success": (decode_s + prefill_s) / per}


def compare(methods: dict[str, dict], baseline: str) -> dict[str, dict]:
    """Savings (%) in HBM traffic and speedup in time per success against ``baseline``."""
    if baseline not in methods:
        raise ValueError(f"baseline {baseline!r} is not among the methods {sorted(methods)}")
    base = methods[baseline]
    out = {}
    for name, figures in methods.items():
        # NaN where either side has no success: a cost per success does not exist there.
        out[name] = dict(figures,
                         savings_pct=100 * (1 - figures["decode_tb_per_success"] / base["decode_tb_per_success"])
                         if base["decode_tb_per_success"] else math.nan,
                         speedup=base["total_s_per_success"] / figures["total_s_per_success"]
                         if figures["total_s_per_success"] else math.nan)
    return out


if __name__ == "__main__":
    model, hardware = Model.named("Qwen3-8B"), Hardware.named("H200")
    window = [Call(14000, 300)] * 20
    arc = [Call(5000, 300)] * 20
    table = compare({"sliding_window": roofline(window, 10, model, hardware),
                     "arc": roofline(arc, 10, model, hardware)}, "sliding_window")
    for name, row in table.items():
        print(f"{name:>15}: B={row['batch_size']:>3} {row['decode_tb_per_success']:.4f} TB/success "
              f"{row['total_s_per_success']:.4f} s/success  savings {row['savings_pct']:.1f}%  "
              f"speedup {row['speedup']:.2f}x")
