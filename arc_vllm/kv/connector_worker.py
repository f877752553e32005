"""The worker half of ARC's KV-reuse connector (runs in each vLLM worker process).

- ``register_kv_caches``: reads the layout the engine chose for every layer
  (``layout_check.engine_layout``: the CPU attention ISA, or the GPU paged layout; a layout
  not implemented refuses ``--arc-kv-reuse`` with an error naming it), then runs the start-up
  layout check once per distinct layout. A failed check logs an error naming the layout, the
  dtype and the error, and the worker never fills a claim (the scheduler half, told through
  the handshake, claims nothing; should a load arrive anyway its blocks are reported as load
  errors, so vLLM recomputes them).
- ``start_load_kv``: fills claimed slots before the forward that needs them: V copied, K
  copied then rotated from the position it was computed at to its new one
  (``kernels/kv_layout.py`` ``fill``).
- ``wait_for_save``: once a step's KV is written, copies each completed prompt's K and V into
  host memory (outside the engine's KV budget, so a GPU's memory is not touched), per layer
  (``SavedKV``). The positions whose KV came from the session's last saved view are kept as
  that view kept them, with the position they were computed at: KV moved by one compaction
  and moved again by the next is rotated once, from where it was computed, not twice (in
  16-bit caches each rotation rounds). A warm-up stage keeps its last partial block.
"""

from __future__ import annotations

import logging

import torch

from arc_vllm.kernels.kv_layout import LayerCache, slots_of
from arc_vllm.kv.connector_meta import STAGE, VIEW, ArcKVHandshake, ArcKVMetadata, Save
from arc_vllm.kv.layout_check import check_layout, engine_layout

logger = logging.getLogger(__name__)


class SavedKV:
    """K and V of positions ``first ..`` of a saved prompt, per layer (row i: position
    first + i), and per row the position its K was computed at (``origin``)."""

    def __init__(self, layers: dict[str, tuple[torch.Tensor, torch.Tensor]], first: int, length: int):
        self.layers = layers
        self.first = first
        self.origin = torch.arange(first, first + length, dtype=torch.int64)

    def carry(self, last: "SavedKV | None", pieces: list[tuple[int, int, int]]) -> None:
        """Take ``pieces`` (position here, position in ``last``, length) as ``last`` kept them."""
        if last is None:
            return
        for new, old, length in pieces:
            length = min(length, last.first + len(last.origin) - old, self.first + len(self.origin) - new)
            if length <= 0 or old < last.first or new < self.first:
                continue
            here = torch.arange(new - self.first, new - self.first + length)
            there = torch.arange(old - last.first, old - last.first + length)
            if new == old:  # in place (the hit's blocks): only KV moved there differs from the cache's
                moved = last.origin[there] != there + last.first
                here, there = here[moved], there[moved]
                if not len(here):
                    continue
            for name, (key, value) in self.layers.items():
                key[here], value[here] = last.layers[name][0][there], last.layers[name][1][there]
            self.origin[here] = last.origin[there]

    def rows(self, pieces: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
        """``pieces`` (new position, saved position, length) with saved positions as rows."""
        return [(new, old - self.first, length) for new, old, length in pieces]


class ArcKVWorker:
    def __init__(self, vllm_config, is_neox: bool, forced_layout: str | None = None):
        self.vllm_config = vllm_config
        self.is_neox = is_neox
        # Only for tests of the self-check: write this layout whatever the engine chose.
        self.forced_layout = forced_layout
        self.layers: dict[str, LayerCache] = {}
        self.store: dict[str, SavedKV] = {}  # session -> its last saved view
        self.stage_tails: dict[str, SavedKV] = {}  # session -> its last warm-up stage's partial block
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
            saved = (self.store if load.source == VIEW else self.stage_tails).get(load.session)
            if not self.ok or saved is None:  # never fill what the check did not pass
                block_size = next(iter(self.layers.values())).block_size
                self.load_errors.update(load.block_ids[position // block_size]
                                        for new, _, length in load.pieces
                                        for position in range(new, new + length))
                continue
            pieces = saved.rows(load.pieces)
            for name, layer in self.layers.items():
                key, value = saved.layers[name]
                layer.fill(key, value, pieces, load.block_ids, self.cos_sin(layer.tensor.device),
                           self.is_neox, origin=saved.origin)

    def take_load_errors(self) -> set[int]:
        errors, self.load_errors = self.load_errors, set()
        return errors

    def wait_for_save(self, meta: ArcKVMetadata) -> None:
        for save in meta.saves:
            if not self.ok:
                continue
            saved = self.read(save)
            if save.source == STAGE:
                self.stage_tails[save.session] = saved
                continue
            saved.carry(self.store.get(save.session), save.carried)
            self.store[save.session] = saved
            self.stage_tails.pop(save.session, None)  # the view's warm-up is over
        for session in meta.drops:
            self.store.pop(session, None)
            self.stage_tails.pop(session, None)

    def read(self, save: Save) -> SavedKV:
        """The K and V of ``save``'s positions, copied out of the engine's cache."""
        layers = {}
        for name, layer in self.layers.items():
            slots = slots_of(save.block_ids, save.first, save.num_tokens - save.first, layer.block_size)
            layers[name] = tuple(part.cpu() for part in layer.read(slots.to(layer.tensor.device)))
        return SavedKV(layers, save.first, save.num_tokens - save.first)
