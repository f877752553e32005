"""The KV-reuse connector's knobs, in one place that the connector and every stager read.

vLLM hands a connector its options as ``kv_transfer_config.kv_connector_extra_config``; the
warm-up stager (``kv/warmup.py``) must cut stages with the same ``min_run`` the connector
claims with, or stages and claims disagree silently. So both read ``KVReuseConfig`` from the
same engine config:

    KVReuseConfig.of_vllm(vllm_config)      # what this engine's connector runs with
    KVReuseConfig(host_tokens=8192).transfer_config()   # the kv_transfer_config that installs it

Options: ``min_run`` (16: the shortest piece worth claiming), ``host_tokens`` (65536: saved
tokens over all sessions; host memory is that times the model's KV bytes per token), and the
connector's own ``is_neox`` and ``layout`` (see ``kv/connector.py``), passed through.
Pure Python: no vLLM or torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field

CONNECTOR_NAME = "ArcKVConnector"
CONNECTOR_MODULE = "arc_vllm.kv.connector"


@dataclass(frozen=True)
class KVReuseConfig:
    min_run: int = 16
    host_tokens: int = 65536
    other: dict = field(default_factory=dict)  # the connector's own options (is_neox, layout)

    @classmethod
    def of_extra(cls, extra: dict | None) -> "KVReuseConfig":
        extra = dict(extra or {})
        defaults = cls()
        return cls(min_run=int(extra.pop("min_run", defaults.min_run)),
                   host_tokens=int(extra.pop("host_tokens", defaults.host_tokens)), other=extra)

    @classmethod
    def of_vllm(cls, vllm_config) -> "KVReuseConfig":
        """The connector's config in this engine's ``VllmConfig`` (defaults if it runs none)."""
        transfer = getattr(vllm_config, "kv_transfer_config", None)
        return cls.of_extra(transfer.kv_connector_extra_config if transfer is not None else None)

    def extra(self) -> dict:
        return {"min_run": self.min_run, "host_tokens": self.host_tokens, **self.other}

    def transfer_config(self) -> dict:
        """vLLM's ``kv_transfer_config`` (as keyword arguments of ``KVTransferConfig``)."""
        return {"kv_connector": CONNECTOR_NAME, "kv_role": "kv_both",
                "kv_connector_module_path": CONNECTOR_MODULE, "kv_connector_extra_config": self.extra()}


MIN_RUN = KVReuseConfig().min_run
