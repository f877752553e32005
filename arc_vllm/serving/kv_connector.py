"""ARC's KV-reuse connector: after a compaction, the new view's KV comes from the session's last view.

Installed by ``--arc-kv-reuse`` (``serving/plugin.py``) as
``--kv-transfer-config '{"kv_connector": "ArcKVConnector", "kv_connector_module_path":
"arc_vllm.serving.kv_connector", "kv_role": "kv_both"}'``. It acts only on requests whose
``sampling_params.extra_args`` hold ``arc_session``; every other request passes untouched.
``arc_kv_recompute`` N there: claim nothing unless the run's first N tokens were computed;
``arc_kv_save`` false: a warm-up stage (``serving/kv_warmup.py``), claimed for, never saved.

vLLM runs one instance per side:

- scheduler side (engine core): remembers, per session, the token ids of the last prompt it
  had the worker save. For a new request of that session it claims the run of tokens right
  after the prefix-cache hit that the saved prompt holds, as pieces (``agent/kv_spans.py``
  ``claim_pieces``), and tells the worker which saved positions go to which new ones. When a
  request's prompt is complete it tells the worker to save it (replacing the session's last).
  Sessions beyond ``host_tokens`` saved tokens are dropped, oldest first.
- worker side (each worker process): keeps the saved prompts' K and V per layer in host
  memory (outside the engine's KV budget, so a GPU's memory is not touched), and fills
  claimed slots before the forward that needs them: V copied, K copied then rotated by (new
  position - old position) with ``relocate_kv`` (``kernels/kv_layout.py``).

Both sides see the same metadata in the same order (vLLM passes it with every step), so they
agree on what is saved without any other channel. Reused KV is exact at layer 0 and
approximate deeper (the text before a moved span changed); ``arc-vllm bench kv-reuse``
measures what that costs. ``claimed`` (request id -> tokens supplied) feeds the scheduler
hook's ``arc_engine_kv_reused_tokens_total``; ``claimed_total`` counts them all.

Options (``kv_connector_extra_config``): ``min_run`` (16: shortest piece worth claiming),
``host_tokens`` (65536: saved tokens over all sessions; host memory is that times the
model's KV bytes per token, e.g. 1.5 GB for SmolLM2-135M, 9.7 GB for Qwen3-8B, shared among
tensor-parallel workers), ``is_neox`` (true: the model's RoPE pairing). ``--arc-kv-reuse-host-tokens``
sets ``host_tokens``.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

import torch
from vllm.distributed.kv_transfer.kv_connector.v1.base import (KVConnectorBase_V1,
                                                                KVConnectorMetadata, KVConnectorRole)

from arc_vllm.agent.kv_spans import claim_pieces, claimed_tokens, index_runs
from arc_vllm.kernels.kv_layout import LayerCache, slots_of


@dataclass
class Load:
    session: str
    block_ids: list[int]
    pieces: list[tuple[int, int, int]]  # (position in the new prompt, position saved, length)


@dataclass
class Save:
    session: str
    block_ids: list[int]
    num_tokens: int


@dataclass
class ArcKVMetadata(KVConnectorMetadata):
    loads: list[Load] = field(default_factory=list)
    saves: list[Save] = field(default_factory=list)
    drops: list[str] = field(default_factory=list)


class SavedPrompt:
    """A saved prompt's token ids, and which positions hold moved (approximate) KV. Claims that
    move KV take only positions whose KV was computed there: KV is moved at most once, so the
    error of one move does not add up over compactions. The index of the movable runs is built
    when a claim first needs it (a compaction turn), not on save, so the engine's scheduling
    loop pays for it only then."""

    def __init__(self, tokens: list[int], moved: bytearray, min_run: int):
        self.tokens = tokens
        self.moved = moved
        self.min_run = min_run
        self._movable = None
        self._index = None

    @property
    def movable(self) -> list[int]:
        """The tokens, with moved positions replaced by values no token equals."""
        if self._movable is None:
            self._movable = [-1 - i if moved else token
                             for i, (token, moved) in enumerate(zip(self.tokens, self.moved))]
        return self._movable

    @property
    def index(self) -> dict:
        if self._index is None:
            self._index = index_runs(self.movable, self.min_run)
        return self._index


@dataclass
class ViewInProgress:
    """A session's view between its first request (a warm-up stage, or the request itself)
    and its save: where the prefix cache's hit ended, and what was claimed for it."""

    first_hit: int
    pieces: list[tuple[int, int, int]] = field(default_factory=list)

    def moved(self, length: int, last: SavedPrompt | None) -> bytearray:
        """Per position of the view: 1 where its KV was moved. The hit's blocks came from the
        last prompt (its flags go on); a piece claimed in place keeps its source's flags."""
        moved = bytearray(length)
        if last is not None:
            inherited = min(self.first_hit, len(last.moved), length)
            moved[:inherited] = last.moved[:inherited]
        for new, old, size in self.pieces:
            moved[new:new + size] = last.moved[old:old + size] if new == old and last else b"\x01" * size
        return moved


def arc_extra(request) -> dict:
    params = getattr(request, "sampling_params", None)
    return (params.extra_args or {}) if params is not None else {}


class ArcKVConnector(KVConnectorBase_V1):
    def __init__(self, vllm_config, role, kv_cache_config=None):
        super().__init__(vllm_config=vllm_config, role=role, kv_cache_config=kv_cache_config)
        extra = self._kv_transfer_config.kv_connector_extra_config or {}
        self.min_run = int(extra.get("min_run", 16))
        self.host_tokens = int(extra.get("host_tokens", 65536))
        self.is_neox = bool(extra.get("is_neox", True))
        self.block_size = vllm_config.cache_config.block_size
        if role == KVConnectorRole.SCHEDULER:
            self.saved: OrderedDict[str, SavedPrompt] = OrderedDict()
            self.plans: dict[str, list[tuple[int, int, int]]] = {}  # request id -> pieces
            self.sessions: dict[str, str] = {}  # request id -> session, while planned
            self.pending_saves: dict[str, tuple[str, list[int]]] = {}  # request id -> (session, prompt)
            self.views: dict[str, ViewInProgress] = {}  # session -> its view being built
            self.claimed: dict[str, int] = {}  # read (and emptied) by the scheduler hook
            self.claimed_total = 0  # every token supplied so far (read in-process by the bench)
        else:
            self.layers: dict[str, LayerCache] = {}
            self.store: dict[str, dict[str, tuple[torch.Tensor, torch.Tensor]]] = {}
            self.cos_sin_cache = None
            self.vllm_config = vllm_config

    # ---- scheduler side -------------------------------------------------------------------

    def get_num_new_matched_tokens(self, request, num_computed_tokens: int):
        extra = arc_extra(request)
        if extra.get("arc_session") is None:
            return 0, False
        session = str(extra["arc_session"])
        prompt = list(request.prompt_token_ids or [])
        if extra.get("arc_kv_save", True):  # a warm-up stage claims but is not saved
            self.pending_saves[request.request_id] = (session, prompt)
        saved = self.saved.get(session)
        self.plans.pop(request.request_id, None)
        if session not in self.views:
            self.views[session] = ViewInProgress(num_computed_tokens)
        if saved is None or num_computed_tokens >= len(prompt) - 1:
            return 0, False
        hit, end = num_computed_tokens, min(len(saved.tokens), len(prompt) - 1)
        if saved.tokens[hit:hit + self.min_run] == prompt[hit:hit + self.min_run]:
            # The common turn: this prompt goes on from the saved one; claim the rest of the
            # saved text in place (its last partial block, which the prefix cache cannot give).
            length = self.min_run
            while hit + length < end and saved.tokens[hit + length] == prompt[hit + length]:
                length += 1
            pieces = [(hit, hit, min(length, end - hit))]
        else:
            pieces = claim_pieces(saved.movable, saved.index, prompt, hit, self.min_run,
                                  int(extra.get("arc_kv_recompute", 0) or 0))
        if not pieces:
            return 0, False
        self.plans[request.request_id] = pieces
        self.sessions[request.request_id] = session
        return claimed_tokens(pieces), False

    def update_state_after_alloc(self, request, blocks, num_external_tokens: int):
        if num_external_tokens == 0:
            self.plans.pop(request.request_id, None)

    def build_connector_meta(self, scheduler_output) -> ArcKVMetadata:
        meta = ArcKVMetadata()
        # New requests, and preempted ones resumed (they were claimed for again).
        scheduled = {new.req_id: new.num_computed_tokens for new in scheduler_output.scheduled_new_reqs}
        cached = scheduler_output.scheduled_cached_reqs
        scheduled.update(zip(cached.req_ids, cached.num_computed_tokens))
        for request_id in scheduled:
            pieces = self.plans.pop(request_id, None)
            if pieces:
                session = self.sessions.pop(request_id)
                block_ids = list(self._kv_cache_manager.get_block_ids(request_id)[0])
                meta.loads.append(Load(session, block_ids, pieces))
                self.views[session].pieces.extend(pieces)
                supplied = claimed_tokens(pieces)
                self.claimed[request_id] = self.claimed.get(request_id, 0) + supplied
                self.claimed_total += supplied
                self.saved.move_to_end(session)
        # A prompt complete after this step is saved by the worker at its end.
        for request_id, computed in scheduled.items():
            if request_id not in self.pending_saves:
                continue
            session, prompt = self.pending_saves[request_id]
            if computed + scheduler_output.num_scheduled_tokens.get(request_id, 0) < len(prompt):
                continue
            del self.pending_saves[request_id]
            block_ids = list(self._kv_cache_manager.get_block_ids(request_id)[0])
            meta.saves.append(Save(session, block_ids, len(prompt)))
            last = self.saved.pop(session, None)
            view = self.views.pop(session, None) or ViewInProgress(0)
            self.saved[session] = SavedPrompt(prompt, view.moved(len(prompt), last), self.min_run)
        while sum(len(saved.tokens) for saved in self.saved.values()) > self.host_tokens:
            dropped = self.saved.popitem(last=False)[0]
            self.views.pop(dropped, None)
            meta.drops.append(dropped)
        return meta

    def request_finished(self, request, block_ids):
        for pending in (self.pending_saves, self.plans, self.sessions, self.claimed):
            pending.pop(request.request_id, None)
        return False, None

    # ---- worker side ----------------------------------------------------------------------

    def register_kv_caches(self, kv_caches: dict[str, torch.Tensor]):
        self.layers = {name: LayerCache(tensor) for name, tensor in kv_caches.items()}

    def _rope(self, device) -> torch.Tensor:
        if self.cos_sin_cache is None:
            # vLLM's own rotary embedding for this model, so rotations match the engine's.
            from vllm.config import set_current_vllm_config
            from vllm.model_executor.layers.rotary_embedding import get_rope

            model = self.vllm_config.model_config
            max_position = max(model.max_model_len,
                               getattr(model.hf_config, "max_position_embeddings", 0) or 0)
            with set_current_vllm_config(self.vllm_config):
                rope = get_rope(model.get_head_size(), max_position=max_position,
                                is_neox_style=self.is_neox, dtype=torch.float32,
                                rope_parameters=getattr(model.hf_config, "rope_parameters", None))
            self.cos_sin_cache = rope.cos_sin_cache.float().contiguous().to(device)
        return self.cos_sin_cache

    def start_load_kv(self, forward_context, **kwargs) -> None:
        meta = self._get_connector_metadata()
        if not isinstance(meta, ArcKVMetadata):
            return
        for load in meta.loads:
            saved = self.store[load.session]
            for name, layer in self.layers.items():
                key, value = saved[name]
                layer.fill(key, value, load.pieces, load.block_ids, self._rope(layer.tensor.device),
                           self.is_neox)

    def wait_for_layer_load(self, layer_name: str) -> None:
        return  # loads finish in start_load_kv, before the forward

    def save_kv_layer(self, layer_name, kv_layer, attn_metadata, **kwargs) -> None:
        return  # saved whole in wait_for_save, once the step's KV is written

    def wait_for_save(self):
        meta = self._get_connector_metadata()
        if not isinstance(meta, ArcKVMetadata):
            return
        for save in meta.saves:
            store = {}
            for name, layer in self.layers.items():
                slots = slots_of(save.block_ids, 0, save.num_tokens, layer.block_size)
                store[name] = tuple(part.cpu() for part in layer.read(slots.to(layer.tensor.device)))
            self.store[save.session] = store
        for session in meta.drops:
            self.store.pop(session, None)
