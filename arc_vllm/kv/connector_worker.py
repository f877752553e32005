"""The worker half of ARC's KV-reuse connector (runs in each vLLM worker process).

- ``register_kv_caches``: reads the layout the engine chose for every layer
  (``layout_check.engine_layout``: the CPU attention ISA, or the GPU paged layout; a layout
  not implemented refuses ``--arc-kv-reuse`` with an error naming it), then runs the start-up
  layout check once per distinct layout. A failed check logs an error naming the layout, the
  dtype and the error, and the worker never fills a claim (the scheduler half, told through
  the handshake, claims nothing; should a load arrive anyway its blocks are reported as load
  errors, so vLLM recomputes them).
- ``start_load_kv``: fills claimed slots before the forward that needs them: V copied, K
  copied then rotated by (new position - old position) (``kernels/kv_layout.py`` ``fill``).
- ``wait_for_save``: once a step's KV is written, copies each completed prompt's K and V into
  host memory (outside the engine's KV budget, so a GPU's memory is not touched), per layer.
"""

from __future__ import annotations

import logging

import torch

from arc_vllm.kernels.kv_layout import LayerCache, slots_of
from arc_vllm.kv.connector_meta import ArcKVHandshake, ArcKVMetadata
from arc_vllm.kv.layout_check import check_layout, engine_layout

logger = logging.getLogger(__name__)


class ArcKVWorker:
    def __init__(self, vllm_config, is_neox: bool, forced_layout: str | None = None):
        self.vllm_config = vllm_config
        self.is_neox = is_neox
        # Only for tests of the self-check: write this layout whatever the engine chose.
        self.forced_layout = forced_layout
        self.layers: dict[str, LayerCache] = {}
        self.store: dict[str, dict[str, tuple[torch.Tensor, torch.Tensor]]] = {}
        self.checks: list[dict] = []
        self.ok = False
        self.rope = None
        self.cos_sin_tables: dict = {}  # device -> the rope's cos/sin table there
        self.load_errors: set[int] = set()

    def register_kv_caches(self, kv_caches: dict[str, torch.Tensor]) -> None:
        chosen = {name: engine_layout(name, tensor, self.vllm_config) for name, tensor in kv_caches.items()}
        self.layers = {name: LayerCache(tensor, self.forced_layout or chosen[name])
                       for name, tensor in kv_caches.items()}
        checked = {}
        for name, layer in self.layers.items():  # one check per distinct layout, dtype and shape
            kind = (chosen[name], layer.layout, layer.tensor.dtype, tuple(layer.tensor.shape[1:]))
            if kind not in checked:
                checked[kind] = check_layout(layer.tensor, chosen[name], layer.layout,
                                             self._rope(), self.is_neox)
        self.checks = [result.to_dict() for result in checked.values()]
        self.ok = all(result.ok for result in checked.values())
        model = self.vllm_config.model_config.model
        for result in checked.values():
            if result.ok:
                logger.info("%s (model %s)", result.summary(), model)
            else:
                logger.error("%s (model %s): KV reuse is disabled, serving without it", result.summary(), model)

    def handshake(self) -> ArcKVHandshake:
        return ArcKVHandshake(checks=self.checks)

    def _rope(self):
        if self.rope is None:
            # vLLM's own rotary embedding for this model, so rotations match the engine's.
            from vllm.config import set_current_vllm_config
            from vllm.model_executor.layers.rotary_embedding import get_rope

            model = self.vllm_config.model_config
            max_position = max(model.max_model_len,
                               getattr(model.hf_config, "max_position_embeddings", 0) or 0)
            with set_current_vllm_config(self.vllm_config):
                self.rope = get_rope(model.get_head_size(), max_position=max_position,
                                     is_neox_style=self.is_neox, dtype=torch.float32,
                                     rope_parameters=getattr(model.hf_config, "rope_parameters", None))
        return self.rope

    def cos_sin(self, device) -> torch.Tensor:
        """The model's rotary cos/sin table (vLLM's own), on ``device``."""
        if device not in self.cos_sin_tables:
            self.cos_sin_tables[device] = self._rope().cos_sin_cache.float().contiguous().to(device)
        return self.cos_sin_tables[device]

    def start_load_kv(self, meta: ArcKVMetadata) -> None:
        for load in meta.loads:
            saved = self.store.get(load.session)
            if not self.ok or saved is None:  # never fill what the check did not pass
                block_size = next(iter(self.layers.values())).block_size
                self.load_errors.update(load.block_ids[position // block_size]
                                        for new, _, length in load.pieces
                                        for position in range(new, new + length))
                continue
            for name, layer in self.layers.items():
                key, value = saved[name]
                layer.fill(key, value, load.pieces, load.block_ids, self.cos_sin(layer.tensor.device),
                           self.is_neox)

    def take_load_errors(self) -> set[int]:
        errors, self.load_errors = self.load_errors, set()
        return errors

    def wait_for_save(self, meta: ArcKVMetadata) -> None:
        for save in meta.saves:
            if not self.ok:
                continue
            store = {}
            for name, layer in self.layers.items():
                slots = slots_of(save.block_ids, 0, save.num_tokens, layer.block_size)
                store[name] = tuple(part.cpu() for part in layer.read(slots.to(layer.tensor.device)))
            self.store[save.session] = store
        for session in meta.drops:
            self.store.pop(session, None)
