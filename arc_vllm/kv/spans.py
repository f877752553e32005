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
  by piece (``claims.plan_claim`` adds the connector's in-place rules);
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
                      recompute_tokens: int = 0, min_gain: int = 128, max_stages: int = 16,
                      index: dict | None = None, hit: int | None = None) -> list[int]:
    """Where to cut ``current`` into warm-up stages (empty: none) so that a connector can claim
    reusable runs that new text separates. Stage k sends ``current[:boundary_k]``: the prefix
    cache holds everything up to the previous boundary's last whole block, the connector
    supplies the rest of that block from the previous stage (``claims.StageTail``) and claims
    the run from the boundary on (``claim_pieces``), the engine computes the rest up to the
    boundary. The real request is the last stage.

    The runs ``earlier`` holds are found once; adjacent runs chain (a claim continues through
    them), so chains are disjoint and in order, and any set of them can be claimed, one stage
    each. A chain's boundary is ``recompute_tokens`` into the first of its runs with a whole
    ``min_run``-gram after that; its gain is the claim from there to the chain's end. Every
    chain that gains ``min_gain`` tokens or more is a stage, the ``max_stages`` largest if
    there are more. (Choosing one stage at a time, the largest claim after the last, gave up
    every chain before a long one; boundaries rounded up to a block gave up each run's first
    block: together 0.24 of what the sample trajectories could reuse.) ``earlier`` may be a
    saved prompt's movable tokens (``claims.SavedPrompt.movable``), with ``hit`` the prefix
    cache's over its real tokens."""
    if not earlier:
        return []
    index = index if index is not None else index_runs(earlier, min_run)
    hit = hit if hit is not None else prefix_hit(earlier, current, block_size)
    runs = matched_runs(earlier, index, current, hit, min_run)
    last = len(current) - 1  # never claimed: the engine samples from it
    # The request claims from the hit by itself; stages start after what that claim covers.
    computed_from = hit + claimed_tokens(claim_pieces(earlier, index, current, hit, min_run, recompute_tokens))
    candidates = []  # (gain, boundary), one per chain
    first_run = 0
    while first_run < len(runs):
        last_run = first_run
        while last_run + 1 < len(runs) and runs[last_run + 1][0] == sum(runs[last_run]):
            last_run += 1
        chain_end = min(sum(runs[last_run]), last)
        for run_start, length in runs[first_run:last_run + 1]:
            boundary = max(run_start + recompute_tokens, computed_from + 1)
            if boundary + min_run <= min(run_start + length, last):
                if chain_end - boundary >= min_gain:
                    candidates.append((chain_end - boundary, boundary))
                break  # a later run of the chain claims less of it
        first_run = last_run + 1
    return sorted(boundary for _, boundary in sorted(candidates, reverse=True)[:max_stages])
