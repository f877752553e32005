"""The scheduler half of ARC's KV-reuse connector (runs in vLLM's engine core).

It remembers, per session, the token ids of the last prompt it had the worker save. For a new
request of that session it claims the run of tokens right after the prefix-cache hit that the
saved prompt holds, as pieces (``kv/claims.py`` ``plan_claim``, the rule replay's figures use
too), and tells the worker which saved positions go to which new ones. When a request's prompt
is complete it tells the worker to save it (replacing the session's last), naming the pieces
whose KV came from the last one (the worker keeps those as first computed, so KV moved again
is rotated once). When a warm-up stage's prompt is complete it tells the worker to keep the
stage's last partial block, which the next stage's claim starts with. Sessions beyond
``host_tokens`` saved tokens are dropped, oldest first.

vLLM's contract, kept here:

- ``get_num_new_matched_tokens`` only plans, and writes nothing: vLLM may call it again and
  again for a request that waits for blocks, with a prefix hit that changes meanwhile (other
  requests fill or evict prefix blocks). Once vLLM has allocated the request's blocks,
  ``update_state_after_alloc`` records the request and how many of the planned tokens vLLM
  took; that step's ``build_connector_meta`` reads the hit it was scheduled with (its
  computed tokens less those taken), plans again from there (the same plan: nothing it
  depends on changes within a scheduling pass), starts the session's view in progress at
  that hit, counts the claim and sends it to the workers.
- ``request_finished`` runs once per request, finished or aborted: it drops everything held
  for the request, and the session's view in progress when the request was to save it (or was
  one of its warm-up stages) and was aborted before its prompt was complete.
- Nothing is claimed until the worker's start-up layout check passed
  (``set_xfer_handshake_metadata``, vLLM's channel from the workers after the caches are
  registered): a failed or missing check serves without reuse.

Tokens supplied are reported through vLLM's connector stats (``get_kv_connector_stats``).
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from dataclasses import dataclass

from prometheus_client import Gauge

from arc_vllm.kv.claims import Claim, SavedPrompt, StageTail, ViewInProgress, plan_claim
from arc_vllm.kv.connector_meta import STAGE, ArcKVMetadata, ArcKVStats, Load, Save
from arc_vllm.kv.extra_args import ArcExtraArgs
from arc_vllm.kv.spans import claimed_tokens

logger = logging.getLogger(__name__)

# Set once the workers' layout check is in; in the engine core's process, so it reaches
# /metrics through prometheus_client's multiprocess directory (as the arc_engine_* counters).
KV_REUSE_ENABLED = Gauge("arc_kv_reuse_enabled", "1 when --arc-kv-reuse passed its start-up layout "
                         "check and reuses KV; 0 when it serves without reuse",
                         multiprocess_mode="livemax")


@dataclass
class Tracked:
    """One ARC request the connector follows, from its allocation until it finishes."""

    request: object
    session: str
    taken_tokens: int = 0           # the planned tokens vLLM took at its last allocation
    allocated: bool = True          # allocated since the last step's metadata: its claim is still to load
    scheduled: bool = False         # seen scheduled in a step
    prompt: list[int] | None = None  # to save once computed (None: saved, or not scheduled yet)
    is_view: bool = True            # the prompt is a view (else a warm-up stage: only its tail is kept)
    supplied: int = 0               # tokens whose KV this connector supplied


class ArcKVScheduler:
    def __init__(self, min_run: int, host_tokens: int, block_size: int, max_moves: int = 1):
        self.min_run = min_run
        self.max_moves = max_moves
        self.host_tokens = host_tokens
        self.block_size = block_size
        self.enabled = False  # until the workers' layout check passed
        self.checks: list[dict] = []
        # Bounded by the tokens of all saved prompts, and every session dropped must be named
        # to the workers in the same step's metadata: an OrderedDict, evicted below, says both
        # plainly (a cachetools cache would evict inside an assignment, out of sight).
        self.saved: OrderedDict[str, SavedPrompt] = OrderedDict()
        self.saved_tokens = 0  # the tokens of every prompt in ``saved``
        self.tracked: dict[str, Tracked] = {}  # request id -> what is followed of it, until it finishes
        self.views: dict[str, ViewInProgress] = {}  # session -> its view being built
        self.num_supplied_tokens = 0  # every token supplied so far
        self._unreported = 0  # supplied since the last stats report

    def set_checks(self, checks: list[dict]) -> None:
        """The workers' layout checks (one per worker): reuse only when every one passed."""
        self.checks = checks
        self.enabled = bool(checks) and all(check["ok"] for check in checks)
        KV_REUSE_ENABLED.set(1 if self.enabled else 0)
        if not self.enabled:
            logger.error("--arc-kv-reuse is off for this engine: %s", checks or "no worker reported a layout check")

    def supplied_tokens(self, request_id: str) -> int:
        """Tokens whose KV this connector supplied for a running request (0 if none)."""
        tracked = self.tracked.get(request_id)
        return tracked.supplied if tracked is not None else 0

    def plan(self, request, hit: int) -> Claim:
        """What is claimed for ``request`` after a prefix hit of ``hit`` tokens: a function of
        the request, the hit, the session's saved prompt and its last stage's tail, nothing
        else."""
        extra = ArcExtraArgs.of_request(request)
        if not self.enabled or extra.session is None:
            return Claim()
        view = self.views.get(extra.session)
        return plan_claim(self.saved.get(extra.session), list(request.prompt_token_ids or []), hit,
                          self.min_run, extra.recompute_tokens, view.tail if view is not None else None)

    def get_num_new_matched_tokens(self, request, num_computed_tokens: int) -> tuple[int, bool]:
        return self.plan(request, num_computed_tokens).tokens, False

    def update_state_after_alloc(self, request, num_external_tokens: int) -> None:
        session = ArcExtraArgs.of_request(request).session
        if self.enabled and session is not None:  # a preempted request resumed is allocated again
            tracked = self.tracked.setdefault(request.request_id, Tracked(request, session))
            tracked.request, tracked.taken_tokens, tracked.allocated = request, num_external_tokens, True

    def build_connector_meta(self, scheduler_output, block_ids_of) -> ArcKVMetadata:
        """This step's work for the workers: the claims of requests just scheduled to load, the
        prompts complete after it to save, the sessions the host budget drops."""
        meta = ArcKVMetadata()
        # New requests, and preempted ones resumed (they were claimed for again).
        scheduled = {new.req_id: new.num_computed_tokens for new in scheduler_output.scheduled_new_reqs}
        cached = scheduler_output.scheduled_cached_reqs
        scheduled.update(zip(cached.req_ids, cached.num_computed_tokens))
        for request_id, computed in scheduled.items():
            tracked = self.tracked.get(request_id)
            if tracked is not None and tracked.allocated:
                self.load_claim(meta, request_id, tracked, computed, block_ids_of)
        # A prompt complete after this step is saved by the worker at its end.
        for request_id, computed in scheduled.items():
            tracked = self.tracked.get(request_id)
            if (tracked is not None and tracked.prompt is not None
                    and computed + scheduler_output.num_scheduled_tokens.get(request_id, 0) >= len(tracked.prompt)):
                self.save_prompt(meta, request_id, tracked, block_ids_of)
        while self.saved_tokens > self.host_tokens:
            dropped, prompt = self.saved.popitem(last=False)
            self.saved_tokens -= len(prompt.tokens)
            self.views.pop(dropped, None)
            meta.drops.append(dropped)
        return meta

    def load_claim(self, meta: ArcKVMetadata, request_id: str, tracked: Tracked, computed: int, block_ids_of) -> None:
        """A request scheduled since its allocation: what its claim loads (``computed`` tokens
        of it computed, the prefix cache's hit among them)."""
        request, taken_tokens, session = tracked.request, tracked.taken_tokens, tracked.session
        tracked.allocated, tracked.scheduled = False, True
        hit = computed - taken_tokens
        if hit < 0:  # vLLM changed what it scheduled after the allocation: claim nothing
            logger.error("request %s: %d tokens computed, %d taken from the plan; no claim",
                         request_id, computed, taken_tokens)
            hit, taken_tokens = computed, 0
        # The view is saved; a warm-up stage (``save`` false) keeps only its tail.
        tracked.prompt, tracked.is_view = list(request.prompt_token_ids or []), ArcExtraArgs.of_request(request).save
        claim = self.plan(request, hit).taken(taken_tokens)
        if session not in self.views:  # the view starts at its first request's hit
            self.views[session] = ViewInProgress(hit)
        if claim.tail:  # the last stage's partial block, in place (computed, not reused)
            meta.loads.append(Load(session, block_ids_of(request_id), [(hit, hit, claim.tail)], STAGE))
        if claim.pieces:
            meta.loads.append(Load(session, block_ids_of(request_id), claim.pieces))
            self.views[session].pieces.extend(claim.pieces)
            supplied = claimed_tokens(claim.pieces)
            tracked.supplied += supplied
            self.num_supplied_tokens += supplied
            self._unreported += supplied
            self.saved.move_to_end(session)

    def save_prompt(self, meta: ArcKVMetadata, request_id: str, tracked: Tracked, block_ids_of) -> None:
        """A prompt complete after this step: a view's whole KV is saved, a warm-up stage's tail."""
        session, prompt = tracked.session, tracked.prompt
        tracked.prompt = None
        if not tracked.is_view:
            # Kept only for a session whose view is saved (the host budget then bounds it:
            # dropping the session drops both), and replaced by the stage after.
            tail = StageTail.of_stage(prompt, self.block_size) if session in self.saved else None
            if session in self.views:
                self.views[session].tail = tail
            if tail is not None:
                meta.saves.append(Save(session, block_ids_of(request_id), len(prompt), first=tail.start, source=STAGE))
            return
        last = self.saved.pop(session, None)
        if last is not None:
            self.saved_tokens -= len(last.tokens)
        view = self.views.pop(session, None) or ViewInProgress(0)
        meta.saves.append(Save(session, block_ids_of(request_id), len(prompt), carried=view.carried(prompt, last)))
        self.saved[session] = SavedPrompt(prompt, view.moves(len(prompt), last), self.min_run, self.max_moves)
        self.saved_tokens += len(prompt)

    def request_finished(self, request) -> None:
        tracked = self.tracked.pop(request.request_id, None)
        aborted = request.status.name == "FINISHED_ABORTED"
        # The session's view in progress belongs to the request that was to save it: if that one
        # ends with its prompt incomplete, or one of its warm-up stages is aborted, the view will
        # never be saved, and the session's next request must start a view of its own.
        if tracked is not None and tracked.scheduled and (tracked.prompt is not None or aborted):
            self.views.pop(tracked.session, None)

    def get_kv_connector_stats(self) -> ArcKVStats | None:
        if not self._unreported:
            return None
        stats = ArcKVStats(data={"reused_tokens": self._unreported})
        self._unreported = 0
        return stats
