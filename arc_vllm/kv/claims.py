"""What the KV-reuse connector claims for a session's new prompt: one rule, used by the
connector's scheduler half (``kv/connector_scheduler.py``) and by replay's figures.

A session's last saved prompt (``SavedPrompt``) holds its token ids and, per position, whether
its KV was moved there (approximate) or computed there. ``plan_claim`` plans, for a new
prompt after vLLM's prefix-cache hit, the pieces the connector fills:

- the common turn (the prompt goes on from the saved one): the rest of the saved text, in
  place, whatever it holds (nothing before it changed);
- after a compaction: the contiguous run of pieces found in the saved prompt
  (``spans.claim_pieces``), taking only positions whose KV was computed there, so KV is moved
  at most once and the error of one move does not add up over compactions.

``ViewInProgress`` collects a view's claims over its warm-up stages and gives the saved
prompt's moved flags. ``ClaimReplay`` runs the same rule over a session's prompts in pure
token arithmetic (what ``replay`` reports as ``kv_claimable_tokens`` and
``kv_staged_claimable_tokens``). Pure Python; run ``python -m arc_vllm.kv.claims`` for an
example.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from arc_vllm.kv.config import MIN_RUN
from arc_vllm.kv.spans import claim_pieces, claimed_tokens, index_runs, matched_runs, warmup_boundaries

Pieces = list[tuple[int, int, int]]  # (start in the new prompt, start in the saved one, length)


class SavedPrompt:
    """A saved prompt's token ids, and which positions hold moved (approximate) KV. The index
    of the movable runs is built when a claim first needs it (a compaction turn), not on save,
    so the engine's scheduling loop pays for it only then."""

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


def plan_claim(saved: SavedPrompt | None, prompt: list[int], hit: int, min_run: int,
               recompute_tokens: int = 0) -> Pieces:
    """The pieces the connector claims for ``prompt`` after a prefix-cache hit of ``hit``
    tokens (empty: nothing). The last prompt token is never claimed (the engine samples from it)."""
    if saved is None or hit >= len(prompt) - 1:
        return []
    end = min(len(saved.tokens), len(prompt) - 1)
    if saved.tokens[hit:hit + min_run] == prompt[hit:hit + min_run]:
        # The common turn: this prompt goes on from the saved one; claim the rest of the saved
        # text in place (its last partial block, which the prefix cache cannot give).
        length = min_run
        while hit + length < end and saved.tokens[hit + length] == prompt[hit + length]:
            length += 1
        return [(hit, hit, min(length, end - hit))]
    return claim_pieces(saved.movable, saved.index, prompt, hit, min_run, recompute_tokens)


def taken(pieces: Pieces, tokens: int) -> Pieces:
    """The pieces' first ``tokens`` tokens (they are contiguous in the new prompt): what is
    claimed when vLLM takes less of a plan than was offered (none, to keep a local partial
    block; whole blocks only, for some attention kinds)."""
    kept = []
    for new, old, length in pieces:
        if tokens <= 0:
            break
        kept.append((new, old, min(length, tokens)))
        tokens -= length
    return kept


@dataclass
class ViewInProgress:
    """A session's view between its first request (a warm-up stage, or the request itself)
    and its save: where the prefix cache's hit ended, and what was claimed for it."""

    first_hit: int
    pieces: Pieces = field(default_factory=list)

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


class ClaimReplay:
    """One session's prompts through the connector's rule, without an engine: per prompt, what
    it claims alone (``claimable``), what it claims over the warm-up stages the server sends
    (``staged``, as ``pieces``), and the upper bound of a non-contiguous scheme (``relocatable``: every token
    in runs of at least ``min_run`` found anywhere in the last prompt). The saved prompt (and
    its moved flags) goes on from prompt to prompt as in the connector; ``hit`` is the
    block-aligned common prefix vLLM's prefix cache gives."""

    def __init__(self, block_size: int, min_run: int = MIN_RUN, recompute_tokens: int = 0):
        self.block_size = block_size
        self.min_run = min_run
        self.recompute_tokens = recompute_tokens
        self.saved: SavedPrompt | None = None

    def next(self, prompt: list[int], hit: int) -> dict:
        saved, min_run = self.saved, self.min_run
        if saved is None:
            self.saved = SavedPrompt(prompt, bytearray(len(prompt)), min_run)
            return {"claimable": 0, "staged": 0, "relocatable": 0, "pieces": []}
        claimable = claimed_tokens(plan_claim(saved, prompt, hit, min_run, self.recompute_tokens))
        index = index_runs(saved.tokens, min_run)  # every run of the last prompt, moved or not
        boundaries = warmup_boundaries(saved.tokens, prompt, self.block_size, min_run, self.recompute_tokens,
                                       index=index)
        view = ViewInProgress(hit)
        # Stage k computes up to its boundary, so the next stage's hit is that boundary.
        for start, end in zip([hit, *boundaries], [*boundaries, len(prompt)]):
            view.pieces.extend(plan_claim(saved, prompt[:end], start, min_run, self.recompute_tokens))
        relocatable = sum(length for _, length in matched_runs(saved.tokens, index, prompt, hit, min_run))
        self.saved = SavedPrompt(prompt, view.moved(len(prompt), saved), min_run)
        return {"claimable": claimable, "staged": claimed_tokens(view.pieces), "relocatable": relocatable,
                "pieces": view.pieces}


if __name__ == "__main__":
    replay = ClaimReplay(block_size=16)
    first = list(range(100, 400))
    compacted = list(range(64)) + list(range(900, 940)) + first[150:]  # new text, then a kept run
    print(replay.next(first, 0), replay.next(compacted, 0))
