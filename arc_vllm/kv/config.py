"""The KV-reuse connector's knobs, in one place that the connector and every stager read.

vLLM hands a connector its options as ``kv_transfer_config.kv_connector_extra_config``; the
warm-up stager (``kv/warmup.py``) must cut stages with the same ``min_run`` the connector
claims with, or stages and claims disagree silently. So both read ``KVReuseConfig`` from the
same engine config:

    KVReuseConfig.of_vllm(vllm_config)      # what this engine's connector runs with
    KVReuseConfig(host_tokens=8192).transfer_config()   # the kv_transfer_config that installs it

Options: ``min_run`` (16: the shortest piece worth claiming), ``host_tokens`` (65536: saved
tokens over all sessions; host memory is that times the model's KV bytes per token),
``max_moves`` (1: how many compactions in a row may move a token's KV before it is computed
again; each move reuses KV that saw the text of one more compaction ago), ``min_gain`` (128:
the least claim a warm-up stage is sent for; the stagers read it), and the
connector's own ``is_neox`` and ``layout`` (see ``kv/connector.py``), passed through.

``default_recompute_tokens(dtype)`` is how many tokens of each claimed run are recomputed when
no one says (``--arc-kv-reuse-recompute``, ``VllmBackend``, ``bench kv-reuse``): the point on
the measured quality/prefill frontier that docs/kv-reuse.md ("The default") explains.
Pure Python: no vLLM or torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field

CONNECTOR_NAME = "ArcKVConnector"
# The connector's own options, passed through (``kv/connector.py``).
CONNECTOR_OWN = frozenset({"is_neox", "layout"})
CONNECTOR_MODULE = "arc_vllm.kv.connector"


@dataclass(frozen=True)
class KVReuseConfig:
    min_run: int = 16
    host_tokens: int = 65536
    max_moves: int = 1
    min_gain: int = 128
    other: dict = field(default_factory=dict)  # the connector's own options (is_neox, layout)

    def __post_init__(self) -> None:
        """A ``ValueError`` naming the option for a value the connector cannot run with, and
        for an option it does not know (a misspelt one would otherwise be ignored)."""
        for name, least in (("min_run", 1), ("host_tokens", 0), ("max_moves", 0), ("min_gain", 0)):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < least:
                raise ValueError(f"invalid KVReuseConfig: {name}={value!r} must be an integer >= {least}")
        unknown = sorted(set(self.other) - CONNECTOR_OWN)
        if unknown:
            raise ValueError(f"invalid KVReuseConfig: unknown option(s) {', '.join(map(str, unknown))}; known: "
                             f"min_run, host_tokens, max_moves, min_gain, {', '.join(sorted(CONNECTOR_OWN))}")

    @classmethod
    def of_extra(cls, extra: dict | None) -> "KVReuseConfig":
        """From vLLM's ``kv_connector_extra_config`` (numbers as JSON gives them)."""
        extra = dict(extra or {})
        defaults = cls()
        values = {}
        for name in ("min_run", "host_tokens", "max_moves", "min_gain"):
            value = extra.pop(name, getattr(defaults, name))
            try:
                values[name] = int(value) if not isinstance(value, bool) and float(value) == int(value) else value
            except (TypeError, ValueError):
                values[name] = value  # refused, by name, below
        return cls(**values, other=extra)

    @classmethod
    def of_vllm(cls, vllm_config) -> "KVReuseConfig":
        """The connector's config in this engine's ``VllmConfig`` (defaults if it runs none)."""
        transfer = getattr(vllm_config, "kv_transfer_config", None)
        return cls.of_extra(transfer.kv_connector_extra_config if transfer is not None else None)

    def extra(self) -> dict:
        return {"min_run": self.min_run, "host_tokens": self.host_tokens, "max_moves": self.max_moves,
                "min_gain": self.min_gain, **self.other}

    def transfer_config(self) -> dict:
        """vLLM's ``kv_transfer_config`` (as keyword arguments of ``KVTransferConfig``)."""
        return {"kv_connector": CONNECTOR_NAME, "kv_role": "kv_both",
                "kv_connector_module_path": CONNECTOR_MODULE, "kv_connector_extra_config": self.extra()}


MIN_RUN = KVReuseConfig().min_run
MAX_MOVES = KVReuseConfig().max_moves
MIN_GAIN = KVReuseConfig().min_gain

# From `bench kv-reuse --turns 200` (42 compaction turns, SmolLM2-135M; docs/kv-reuse.md): in
# float32, with the first 192 tokens of a run recomputed (and chains of 128 staged), reused KV
# agrees 0.942 with recomputation at KL 0.014 and 0.73 of the prefill, chained 0.997 / KL
# 0.005 (at 128: 0.871 / 0.016 at 0.68, chained 0.888). In 16-bit dtypes the seams' error is
# amplified: below 256 tokens agreement stays at most 0.86 (KL 0.017 at 192), at 256 the KL
# is recomputation's own (0.001-0.002) and reuse still saves.
RECOMPUTE_TOKENS = {"float32": 192}
RECOMPUTE_TOKENS_16_BIT = 256


def default_recompute_tokens(dtype) -> int:
    """The default for an engine of ``dtype`` (a torch dtype or its name: float32, bfloat16)."""
    name = str(dtype).removeprefix("torch.")
    return RECOMPUTE_TOKENS.get(name, RECOMPUTE_TOKENS_16_BIT)
