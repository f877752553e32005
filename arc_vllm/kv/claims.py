"""What the KV-reuse connector claims for a session's new prompt: one rule, used by the
connector's scheduler half (``kv/connector_scheduler.py``) and by replay's figures.

A session's last saved prompt (``SavedPrompt``) holds its token ids. ``plan_claim`` plans, for
a new prompt after vLLM's prefix-cache hit, what the connector fills (a ``Claim``):

- first, during a compaction's warm-up, the last stage's partial block (``StageTail``): vLLM's
  prefix cache keeps whole blocks only, so a stage that ends inside a block leaves the next
  stage's hit at that block's start; the worker kept the stage's KV of the block's tokens, and
  the connector supplies it in place (computed by the stage, exact);
- the common turn (the prompt goes on from the saved one): the rest of the saved text, in
  place (nothing before it changed);
- after a compaction: the contiguous run of pieces found in the saved prompt
  (``spans.claim_pieces``), wherever they sit, taking only positions whose KV was moved fewer
  than ``max_moves`` times (``KVReuseConfig``; 1: KV is moved once, then computed again).
  Moved KV saw the text before it as it was when it was computed; moved again, it saw the
  text of two compactions ago, and over whole trajectories that error adds up. A move of
  moved KV rotates once, from where it was computed (the worker keeps each position's KV as
  computed, with its position), so rounding does not add up.

``ViewInProgress`` collects a view's claims over its warm-up stages, gives the saved prompt's
move counts and says which of its positions' KV came from the saved prompt (``carried``: the
worker keeps those as first computed). ``ClaimReplay`` runs the same rule over a session's prompts in pure token
arithmetic, stages and their tails included (what ``replay`` reports as
``kv_claimable_tokens`` and ``kv_staged_claimable_tokens``, and how the warm-up planner knows
which runs the connector will find movable). Pure Python; run
``python -m arc_vllm.kv.claims`` for an example.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from arc_vllm.kv.config import MAX_MOVES, MIN_GAIN, MIN_RUN
from arc_vllm.kv.spans import claim_pieces, claimed_tokens, index_runs, matched_runs, warmup_boundaries

Pieces = list[tuple[int, int, int]]  # (start in the new prompt, start in the saved one, length)


class SavedPrompt:
    """A saved prompt's token ids, and per position how many times its KV was moved. The index
    of the movable runs is built when a claim first needs it (a compaction turn), not on save,
    so the engine's scheduling loop pays for it only then."""

    def __init__(self, tokens: list[int], moves: bytearray | None = None, min_run: int = MIN_RUN,
                 max_moves: int = MAX_MOVES):
        self.tokens = tokens
        self.moves = moves if moves is not None else bytearray(len(tokens))
        self.min_run = min_run
        self.max_moves = max_moves
        self._movable = None
        self._index = None

    @property
    def movable(self) -> list[int]:
        """The tokens, with positions moved ``max_moves`` times replaced by values no token equals
        (the tokens themselves while none is: no copy, and ``index`` is theirs)."""
        if self._movable is None:
            if max(self.moves, default=0) < self.max_moves:
                self._movable = self.tokens
            else:
                self._movable = [-1 - i if moves >= self.max_moves else token
                                 for i, (token, moves) in enumerate(zip(self.tokens, self.moves))]
        return self._movable

    @property
    def index(self) -> dict:
        if self._index is None:
            self._index = index_runs(self.movable, self.min_run)
        return self._index


@dataclass(frozen=True)
class StageTail:
    """A warm-up stage's prompt, whose tokens from ``start`` (its last whole block's end) the
    worker kept: the next stage's hit ends at ``start``, and the connector supplies the rest."""

    prompt: list[int]
    start: int

    @classmethod
    def of_stage(cls, prompt: list[int], block_size: int) -> "StageTail | None":
        """The tail a stage of ``prompt`` leaves (None if it ends on a block boundary)."""
        start = len(prompt) // block_size * block_size
        return cls(prompt, start) if start < len(prompt) else None

    def continues(self, prompt: list[int], hit: int) -> int:
        """Tokens of ``prompt`` from ``hit`` this tail supplies: all of it when the hit ends at
        its start and ``prompt`` goes on from the stage's (the KV depends on every token
        before), else 0."""
        end = len(self.prompt)
        if hit != self.start or end > len(prompt) - 1 or prompt[:end] != self.prompt:
            return 0
        return end - hit


@dataclass
class Claim:
    """What the connector fills for a request: ``tail`` tokens from the hit on, from the last
    stage's tail (in place), then ``pieces`` from the saved prompt."""

    tail: int = 0
    pieces: Pieces = field(default_factory=list)

    @property
    def tokens(self) -> int:
        return self.tail + claimed_tokens(self.pieces)

    def taken(self, tokens: int) -> "Claim":
        """The claim's first ``tokens`` tokens (they are contiguous in the new prompt): what is
        claimed when vLLM takes less of a plan than was offered (none, to keep a local partial
        block; whole blocks only, for some attention kinds)."""
        tail = min(self.tail, tokens)
        tokens -= tail
        kept = []
        for new, old, length in self.pieces:
            if tokens <= 0:
                break
            kept.append((new, old, min(length, tokens)))
            tokens -= length
        return Claim(tail, kept)


def plan_claim(saved: SavedPrompt | None, prompt: list[int], hit: int, min_run: int,
               recompute_tokens: int = 0, tail: StageTail | None = None) -> Claim:
    """What the connector claims for ``prompt`` after a prefix-cache hit of ``hit`` tokens
    (empty: nothing). The last prompt token is never claimed (the engine samples from it)."""
    if saved is None or hit >= len(prompt) - 1:
        return Claim()
    from_tail = tail.continues(prompt, hit) if tail is not None else 0
    at = hit + from_tail
    end = min(len(saved.tokens), len(prompt) - 1)
    if at < end and saved.tokens[at:at + min_run] == prompt[at:at + min_run]:
        # The common turn: this prompt goes on from the saved one; claim the rest of the saved
        # text in place (its last partial block, which the prefix cache cannot give).
        length = min_run
        while at + length < end and saved.tokens[at + length] == prompt[at + length]:
            length += 1
        return Claim(from_tail, [(at, at, min(length, end - at))])
    return Claim(from_tail, claim_pieces(saved.movable, saved.index, prompt, at, min_run, recompute_tokens))


@dataclass
class ViewInProgress:
    """A session's view between its first request (a warm-up stage, or the request itself)
    and its save: where the prefix cache's hit ended, what was claimed from the saved prompt,
    and the tail its last warm-up stage left."""

    first_hit: int
    pieces: Pieces = field(default_factory=list)
    tail: StageTail | None = None

    def moves(self, length: int, last: SavedPrompt | None) -> bytearray:
        """Per position of the view: how many times its KV was moved. The hit's blocks came
        from the last prompt (its counts go on); a piece claimed in place keeps its source's
        counts, a moved piece counts one more."""
        moves = bytearray(length)
        if last is not None:
            inherited = min(self.first_hit, len(last.moves), length)
            moves[:inherited] = last.moves[:inherited]
            for new, old, size in self.pieces:
                source = last.moves[old:old + size]
                moves[new:new + size] = source if new == old else bytes(min(count + 1, 255) for count in source)
        return moves

    def carried(self, prompt: list[int], last: SavedPrompt | None) -> Pieces:
        """The pieces of the view whose KV came from the last saved prompt: the hit's blocks
        where they hold its tokens (they may hold KV it had moved), and every claimed piece."""
        if last is None:
            return []
        same, limit = 0, min(self.first_hit, len(last.tokens), len(prompt))
        while same < limit and last.tokens[same] == prompt[same]:
            same += 1
        return ([(0, 0, same)] if same else []) + self.pieces


class ClaimReplay:
    """One session's prompts through the connector's rule, without an engine: per prompt, what
    it claims alone (``claimable``), what it claims over the warm-up stages the server sends
    (``staged``, as ``pieces``; a stage's tail is computed, not claimed), and the upper bound
    of a non-contiguous scheme (``relocatable``: every token in runs of at least ``min_run``
    found anywhere in the last prompt). ``hit`` is the block-aligned common prefix vLLM's
    prefix cache gives; a stage's hit is its predecessor's last whole block. The warm-up
    planner (``kv/warmup.py``) keeps one per session to know, as the connector does, which
    runs are still movable (``stages``)."""

    def __init__(self, block_size: int, min_run: int = MIN_RUN, recompute_tokens: int = 0,
                 max_moves: int = MAX_MOVES, min_gain: int = MIN_GAIN):
        self.block_size = block_size
        self.min_run = min_run
        self.recompute_tokens = recompute_tokens
        self.max_moves = max_moves
        self.min_gain = min_gain
        self.saved: SavedPrompt | None = None

    def stages(self, prompt: list[int], hit: int) -> list[int]:
        """Where the server cuts ``prompt`` into warm-up stages (``spans.warmup_boundaries``),
        planned on the runs the connector will find movable: a run whose KV was moved
        ``max_moves`` times claims nothing, so no stage is sent for it, and a chain it
        interrupts is staged from the movable run after it. The connector's claims over
        those stages are replayed, so ``prompt`` becomes the saved prompt, with its moves."""
        return self._replay(prompt, hit)[0]

    def next(self, prompt: list[int], hit: int) -> dict:
        """Replay's figures for ``prompt``, which then becomes the saved prompt."""
        saved, min_run = self.saved, self.min_run
        if saved is None:
            self._replay(prompt, hit)
            return {"claimable": 0, "staged": 0, "relocatable": 0, "pieces": []}
        claimable = plan_claim(saved, prompt, hit, min_run, self.recompute_tokens).tokens
        # Any placement's bound counts every run; while nothing is moved to the limit, the
        # movable index the stages are planned on is the same one.
        index = saved.index if saved.movable is saved.tokens else index_runs(saved.tokens, min_run)
        relocatable = sum(length for _, length in matched_runs(saved.tokens, index, prompt, hit, min_run))
        pieces = self._replay(prompt, hit)[1]
        return {"claimable": claimable, "staged": claimed_tokens(pieces), "relocatable": relocatable,
                "pieces": pieces}

    def _replay(self, prompt: list[int], hit: int) -> tuple[list[int], Pieces]:
        saved, min_run = self.saved, self.min_run
        boundaries, view = [], ViewInProgress(hit)
        if saved is not None:
            boundaries = warmup_boundaries(saved.movable, prompt, self.block_size, min_run, self.recompute_tokens,
                                           min_gain=self.min_gain, index=saved.index, hit=hit)
            tail, stage_hit = None, hit
            for end in [*boundaries, len(prompt)]:
                view.pieces.extend(plan_claim(saved, prompt[:end], stage_hit, min_run, self.recompute_tokens,
                                              tail).pieces)
                # The stage computes up to ``end``; its whole blocks join the prefix cache.
                tail = StageTail.of_stage(prompt[:end], self.block_size)
                stage_hit = end // self.block_size * self.block_size
        self.saved = SavedPrompt(prompt, view.moves(len(prompt), saved), min_run, self.max_moves)
        return boundaries, view.pieces


if __name__ == "__main__":
    replay = ClaimReplay(block_size=16)
    first = list(range(100, 400))
    compacted = list(range(64)) + list(range(900, 940)) + first[150:]  # new text, then a kept run
    print(replay.next(first, 0), replay.next(compacted, 0))
