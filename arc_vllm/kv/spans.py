"""What of a new prompt's KV an earlier prompt already computed, beyond vLLM's prefix cache:
the token arithmetic under KV reuse.

vLLM's prefix cache reuses whole blocks of the longest common prefix. A KV connector can claim
more, but only a contiguous run right after that hit (``get_num_new_matched_tokens``), and it
must fill the run from KV it holds: spans of the earlier prompt, moved by ``relocate_kv`` when
their position changed.

- ``prefix_hit``: what vLLM's prefix cache gives (the common prefix, in whole blocks);
- ``index_runs`` / ``best_match`` / ``matched_runs``: the runs of ``min_run`` tokens or more
  that a new prompt shares with an earlier one, wherever they sit;
- ``claim_pieces``: the contiguous run after the hit that the earlier prompt can supply, piece
  by piece (``claims.plan_claim`` adds the connector's in-place and move-once rules);
- ``warmup_boundaries``: where to cut a view into warm-up stages so that claims start where
  reusable runs start (``warmup.py``).

Pure token arithmetic; ``claims.ClaimReplay`` turns it into replay's three figures per call.
"""

from __future__ import annotations


def index_runs(tokens: list[int], min_run: int) -> dict[tuple, list[int]]:
    positions: dict[tuple, list[int]] = {}
    for start in range(len(tokens) - min_run + 1):
        positions.setdefault(tuple(tokens[start:start + min_run]), []).append(start)
    return positions


def best_match(earlier: list[int], index: dict, current: list[int], at: int, min_run: int,
               end: int) -> tuple[int, int]:
    """(start in ``earlier``, length) of the longest run of ``current[at:end]`` found in
    ``earlier``; length 0 if none reaches ``min_run`` tokens."""
    best_start, best_length = -1, 0
    for start in index.get(tuple(current[at:at + min_run]), ()):
        length = min_run
        while (at + length < end and start + length < len(earlier)
               and current[at + length] == earlier[start + length]):
            length += 1
        if length > best_length:
            best_start, best_length = start, length
    return best_start, best_length


def longest_match(earlier: list[int], index: dict, current: list[int], at: int, min_run: int) -> int:
    """Length of the longest run of ``current`` from ``at`` found in ``earlier`` (0 if shorter
    than ``min_run``)."""
    return best_match(earlier, index, current, at, min_run, len(current))[1]


def prefix_hit(earlier: list[int] | None, current: list[int], block_size: int) -> int:
    """What vLLM's prefix cache gives ``current`` after ``earlier``: their common prefix, in
    whole blocks."""
    if not earlier:
        return 0
    same, limit = 0, min(len(earlier), len(current))
    while same < limit and earlier[same] == current[same]:
        same += 1
    return same // block_size * block_size


def claim_pieces(earlier: list[int], index: dict, current: list[int], hit: int,
                 min_run: int, recompute_tokens: int = 0) -> list[tuple[int, int, int]]:
    """The contiguous run of ``current`` from ``hit`` that ``earlier`` can supply, as pieces
    ``(start in current, start in earlier, length)`` of at least ``min_run`` tokens each, end to
    end. The last token of ``current`` is never claimed (the engine samples from it). With
    ``recompute_tokens``, nothing is claimed unless the first piece's run began at least that
    many tokens before ``hit`` (those tokens were computed, seeing the new text before them)."""
    pieces, at, end = [], hit, len(current) - 1
    while at < end:
        best_start, best_length = best_match(earlier, index, current, at, min_run, end)
        best_length = min(best_length, end - at)
        if best_length < min_run:
            break
        pieces.append((at, best_start, best_length))
        at += best_length
    if pieces and recompute_tokens:
        _, start, _ = pieces[0]
        back = 0
        while (back < recompute_tokens and back < min(hit, start)
               and current[hit - back - 1] == earlier[start - back - 1]):
            back += 1
        if back < recompute_tokens:
            return []
    return pieces


def claimed_tokens(pieces: list[tuple[int, int, int]]) -> int:
    return sum(length for _, _, length in pieces)


def matched_runs(earlier: list[int], index: dict, current: list[int], start: int,
                 min_run: int) -> list[tuple[int, int]]:
    """``current`` from ``start`` cut greedily into runs found in ``earlier``: (start, length)."""
    runs, at = [], start
    while at < len(current) - 1:
        length = longest_match(earlier, index, current, at, min_run)
        if length:
            runs.append((at, length))
        at += length or 1
    return runs


def warmup_boundaries(earlier: list[int] | None, current: list[int], block_size: int, min_run: int,
                      recompute_tokens: int = 0, min_gain: int = 128, max_stages: int = 8,
                      index: dict | None = None) -> list[int]:
    """Where to cut ``current`` into warm-up stages (empty: none) so that a connector can claim
    reusable runs that new text separates. Stage k sends ``current[:boundary_k]``: the prefix
    cache holds everything up to the previous boundary, the connector claims the run from
    there (``claim_pieces``), the engine computes the rest up to the boundary, whose blocks then
    sit in the prefix cache for the next stage. The real request is the last stage.

    Greedy, in one pass over ``current``: the runs ``earlier`` holds are found once; adjacent
    runs chain (a claim continues through them); each stage's boundary is the first block
    boundary at least ``recompute_tokens`` into a run that leaves the longest claim to the end
    of its chain, taken if that claim is at least ``min_gain`` tokens; at most ``max_stages``."""
    if not earlier:
        return []
    index = index if index is not None else index_runs(earlier, min_run)
    hit = prefix_hit(earlier, current, block_size)
    # Each run, with the end of the chain of adjacent runs it starts (a claim goes on through them).
    runs = matched_runs(earlier, index, current, hit, min_run)
    chain_ends = [0] * len(runs)
    for i in range(len(runs) - 1, -1, -1):
        start, length = runs[i]
        follows = i + 1 < len(runs) and runs[i + 1][0] == start + length
        chain_ends[i] = chain_ends[i + 1] if follows else start + length
    last = len(current) - 1  # never claimed: the engine samples from it
    start = hit
    claimed = claimed_tokens(claim_pieces(earlier, index, current, hit, min_run, recompute_tokens))
    boundaries = []
    while len(boundaries) < max_stages:
        computed_from = start + claimed  # the stage computes from here to its boundary
        best_boundary, best = 0, 0
        for (run_start, length), chain_end in zip(runs, chain_ends):
            first = max(run_start + recompute_tokens, computed_from + 1)
            boundary = -(-first // block_size) * block_size
            # The claim from the boundary starts in this run (recompute_tokens into it), with a
            # whole min_run-gram of it to be found by.
            if boundary + min_run <= min(run_start + length, last) and min(chain_end, last) - boundary > best:
                best_boundary, best = boundary, min(chain_end, last) - boundary
        if best < min_gain:
            break
        boundaries.append(best_boundary)
        start, claimed = best_boundary, best
    return boundaries
