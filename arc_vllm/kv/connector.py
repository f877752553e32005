"""ARC's KV-reuse connector: after a compaction, the new view's KV comes from the session's last view.

Installed by ``--arc-kv-reuse`` (``serving/plugin.py``) as
``--kv-transfer-config '{"kv_connector": "ArcKVConnector", "kv_connector_module_path":
"arc_vllm.kv.connector", "kv_role": "kv_both"}'``. It acts only on requests whose
``sampling_params.extra_args`` hold ``arc_session``; every other request passes untouched.
``arc_kv_recompute`` N there: claim nothing unless the run's first N tokens were computed;
``arc_kv_save`` false: a warm-up stage (``kv/warmup.py``), claimed for, not saved as the view
(only its last partial block is kept, for the next stage; the keys: ``kv/extra_args.py``).

This class is the engine-facing shim; vLLM runs one instance per side and each delegates:

- scheduler side (engine core), ``connector_scheduler.ArcKVScheduler``:
  ``get_num_new_matched_tokens``, ``update_state_after_alloc``, ``build_connector_meta``,
  ``request_finished``, ``set_xfer_handshake_metadata``, ``get_kv_connector_stats``;
- worker side (each worker process), ``connector_worker.ArcKVWorker``:
  ``register_kv_caches`` (with the start-up layout check), ``get_handshake_metadata``,
  ``start_load_kv``, ``wait_for_layer_load``, ``save_kv_layer``, ``wait_for_save``,
  ``get_block_ids_with_load_errors``.

The halves talk only through vLLM's channels (``connector_meta.py``): per-step metadata
down, the layout check up once at start. Reused KV is exact at layer 0 and approximate deeper
(the text before a moved span changed); ``arc-vllm bench kv-reuse`` measures what that costs.

Options (``kv_connector_extra_config``, read through ``kv/config.py`` ``KVReuseConfig``, as
every warm-up stager reads them): ``min_run`` (16: shortest piece worth claiming),
``max_moves`` (1: compactions in a row that may move a token's KV before it is computed again),
``host_tokens`` (65536: saved tokens over all sessions; host memory is that times the
model's KV bytes per token, e.g. 1.5 GB for SmolLM2-135M, 9.7 GB for Qwen3-8B, shared among
tensor-parallel workers, plus 8 bytes per token for the position each K was computed at, and
one block per session in a warm-up), ``is_neox`` (true: the model's RoPE pairing), ``layout`` (tests
only: write this layout whatever the engine chose, to see the self-check catch it).
``--arc-kv-reuse-host-tokens`` sets ``host_tokens``.
"""

from __future__ import annotations

from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorBase_V1, KVConnectorRole

from arc_vllm import vllm_compat
from arc_vllm.kv.config import KVReuseConfig
from arc_vllm.kv.connector_meta import (ArcKVHandshake, ArcKVMetadata, ArcKVPromMetrics,
                                                ArcKVStats)


class ArcKVConnector(KVConnectorBase_V1):
    def __init__(self, vllm_config, role, kv_cache_config=None):
        vllm_compat.check(kv_reuse=True)  # however it was installed, before anything is built
        super().__init__(vllm_config=vllm_config, role=role, kv_cache_config=kv_cache_config)
        config = KVReuseConfig.of_extra(self._kv_transfer_config.kv_connector_extra_config)
        if role == KVConnectorRole.SCHEDULER:
            from arc_vllm.kv.connector_scheduler import ArcKVScheduler

            self.scheduler = ArcKVScheduler(config.min_run, config.host_tokens,
                                            vllm_config.cache_config.block_size, config.max_moves)
            self.worker = None
        else:
            from arc_vllm.kv.connector_worker import ArcKVWorker

            self.scheduler = None
            self.worker = ArcKVWorker(vllm_config, bool(config.other.get("is_neox", True)),
                                      config.other.get("layout"))

    # ---- scheduler side -------------------------------------------------------------------

    def get_num_new_matched_tokens(self, request, num_computed_tokens: int):
        return self.scheduler.get_num_new_matched_tokens(request, num_computed_tokens)

    def update_state_after_alloc(self, request, blocks, num_external_tokens: int):
        self.scheduler.update_state_after_alloc(request, num_external_tokens)

    def build_connector_meta(self, scheduler_output) -> ArcKVMetadata:
        return self.scheduler.build_connector_meta(
            scheduler_output, lambda request_id: list(self._kv_cache_manager.get_block_ids(request_id)[0]))

    def request_finished(self, request, block_ids):
        self.scheduler.request_finished(request)
        return False, None

    def set_xfer_handshake_metadata(self, metadata) -> None:
        self.scheduler.set_checks([check for handshake in metadata.values()
                                   if isinstance(handshake, ArcKVHandshake) for check in handshake.checks])

    def supplied_tokens(self, request_id: str) -> int:
        return self.scheduler.supplied_tokens(request_id)

    @property
    def num_supplied_tokens(self) -> int:
        return self.scheduler.num_supplied_tokens

    @property
    def enabled(self) -> bool:
        return self.scheduler.enabled

    def get_kv_connector_stats(self):
        if self.scheduler is None:
            return None
        return self.scheduler.get_kv_connector_stats()

    @classmethod
    def build_kv_connector_stats(cls, data=None):
        return ArcKVStats(data=dict(data)) if data is not None else ArcKVStats(data={"reused_tokens": 0})

    @classmethod
    def build_prom_metrics(cls, vllm_config, metric_types, labelnames, per_engine_labelvalues):
        return ArcKVPromMetrics(vllm_config, metric_types, labelnames, per_engine_labelvalues)

    # ---- worker side ----------------------------------------------------------------------

    def register_kv_caches(self, kv_caches):
        self.worker.register_kv_caches(kv_caches)

    def get_handshake_metadata(self):
        return self.worker.handshake() if self.worker is not None else None

    def start_load_kv(self, forward_context, **kwargs) -> None:
        meta = self._get_connector_metadata()
        if isinstance(meta, ArcKVMetadata):
            self.worker.start_load_kv(meta)

    def wait_for_layer_load(self, layer_name: str) -> None:
        return  # loads finish in start_load_kv, before the forward

    def save_kv_layer(self, layer_name, kv_layer, attn_metadata, **kwargs) -> None:
        return  # saved whole in wait_for_save, once the step's KV is written

    def wait_for_save(self):
        meta = self._get_connector_metadata()
        if isinstance(meta, ArcKVMetadata):
            self.worker.wait_for_save(meta)

    def get_block_ids_with_load_errors(self) -> set[int]:
        return self.worker.take_load_errors() if self.worker is not None else set()
