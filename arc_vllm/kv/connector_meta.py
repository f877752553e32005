"""What the two halves of ARC's KV-reuse connector tell each other, and what they report.

- ``ArcKVMetadata`` (scheduler -> workers, every step, through vLLM): the claims to fill
  (``Load``), the prompts to save (``Save``), the sessions dropped. A session has two things
  saved: its last ``VIEW`` (what compactions claim from) and, during a warm-up, its last
  stage's partial block (``STAGE``, supplied in place to the next stage).
- ``ArcKVHandshake`` (workers -> scheduler, once at start, through vLLM's handshake-metadata
  channel): each worker's layout check (``kv/layout_check.py``).
- ``ArcKVStats`` (scheduler -> vLLM's stat loggers): tokens whose KV was supplied; vLLM logs
  them and, through ``ArcKVPromMetrics``, counts them on /metrics as
  ``arc_engine_kv_reused_tokens_total``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from vllm.distributed.kv_transfer.kv_connector.v1.base import (KVConnectorHandshakeMetadata,
                                                                KVConnectorMetadata)
from vllm.distributed.kv_transfer.kv_connector.v1.metrics import (KVConnectorPromMetrics,
                                                                   KVConnectorStats)


VIEW = "view"
STAGE = "stage"


@dataclass
class Load:
    session: str
    block_ids: list[int]
    pieces: list[tuple[int, int, int]]  # (position in the new prompt, position saved, length)
    source: str = VIEW


@dataclass
class Save:
    session: str
    block_ids: list[int]
    num_tokens: int
    first: int = 0  # the first position kept (a stage keeps its last partial block)
    source: str = VIEW
    # Pieces (position, position in the last saved view, length) whose KV came from that view:
    # the worker keeps them as the view kept them (as computed, with the position computed at).
    carried: list[tuple[int, int, int]] = field(default_factory=list)


@dataclass
class ArcKVMetadata(KVConnectorMetadata):
    loads: list[Load] = field(default_factory=list)
    saves: list[Save] = field(default_factory=list)
    drops: list[str] = field(default_factory=list)


@dataclass
class ArcKVHandshake(KVConnectorHandshakeMetadata):
    checks: list[dict] = field(default_factory=list)  # LayoutCheck.to_dict() per checked layout


@dataclass
class ArcKVStats(KVConnectorStats):
    def reset(self):
        self.data = {"reused_tokens": 0}

    def aggregate(self, other: KVConnectorStats) -> "ArcKVStats":
        self.data["reused_tokens"] = self.data.get("reused_tokens", 0) + other.data.get("reused_tokens", 0)
        return self

    def reduce(self) -> dict[str, int | float]:
        return {"reused_tokens": self.data.get("reused_tokens", 0)}

    def is_empty(self) -> bool:
        return not self.data.get("reused_tokens", 0)


class ArcKVPromMetrics(KVConnectorPromMetrics):
    def __init__(self, vllm_config, metric_types, labelnames, per_engine_labelvalues):
        super().__init__(vllm_config, metric_types, labelnames, per_engine_labelvalues)
        counter = self._counter_cls(
            name="arc_engine_kv_reused_tokens",
            documentation="Prompt tokens of ARC requests whose KV the KV-reuse connector supplied",
            labelnames=labelnames)
        self.reused = {engine: counter.labels(*values) for engine, values in per_engine_labelvalues.items()}

    def observe(self, transfer_stats_data: dict[str, Any], engine_idx: int = 0):
        self.reused[engine_idx].inc(transfer_stats_data.get("reused_tokens", 0))
