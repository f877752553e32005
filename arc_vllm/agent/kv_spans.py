"""What of a new prompt's KV an earlier prompt already computed, beyond vLLM's prefix cache.

vLLM's prefix cache reuses whole blocks of the longest common prefix. A KV connector can claim
more, but only a contiguous run right after that hit (``get_num_new_matched_tokens``), and it
must fill the run from KV it holds: spans of the earlier prompt, moved by ``relocate_kv`` when
their position changed. Two figures per prompt, in tokens after the prefix-cache hit:

- ``claimable``: the longest run starting at the hit that appears contiguously in the earlier
  prompt (what a connector under vLLM's interface can supply);
- ``relocatable``: every token covered by runs of at least ``min_run`` tokens that appear in the
  earlier prompt, wherever they sit (what a non-contiguous scheme such as CacheBlend could
  reuse: the upper bound).

Pure token arithmetic; ``agent.replay`` records both for every call. ``claim_pieces`` is what
the KV-reuse connector (``serving/kv_connector.py``) claims, piece by piece, and
``warmup_boundaries`` how the server cuts a view into warm-up stages so that claims start where
reusable runs start (``serving/kv_warmup.py``).
"""

from __future__ import annotations


def index_runs(tokens: list[int], min_run: int) -> dict[tuple, list[int]]:
    positions: dict[tuple, list[int]] = {}
    for start in range(len(tokens) - min_run + 1):
        positions.setdefault(tuple(tokens[start:start + min_run]), []).append(start)
    return positions


def longest_match(earlier: list[int], index: dict, current: list[int], at: int, min_run: int) -> int:
    """Length of the longest run of ``current`` from ``at`` found in ``earlier`` (0 if shorter
    than ``min_run``)."""
    best = 0
    for start in index.get(tuple(current[at:at + min_run]), ()):
        length = min_run
        while (at + length < len(current) and start + length < len(earlier)
               and current[at + length] == earlier[start + length]):
            length += 1
        best = max(best, length)
    return best


def reusable_spans(earlier: list[int] | None, current: list[int], hit: int, min_run: int = 16) -> dict:
    """``claimable`` and ``relocatable`` tokens of ``current`` after ``hit`` (see above)."""
    if not earlier:
        return {"claimable": 0, "relocatable": 0}
    index = index_runs(earlier, min_run)
    claimable = longest_match(earlier, index, current, hit, min_run)
    # The last prompt token is always computed (the engine needs one to sample from).
    claimable = min(claimable, max(0, len(current) - 1 - hit))
    relocatable, at = 0, hit
    while at < len(current):
        length = longest_match(earlier, index, current, at, min_run)
        if length:
            relocatable += length
            at += length
        else:
            at += 1
    return {"claimable": claimable, "relocatable": relocatable}


def claim_pieces(earlier: list[int], index: dict, current: list[int], hit: int,
                 min_run: int, recompute_tokens: int = 0) -> list[tuple[int, int, int]]:
    """The contiguous run of ``current`` from ``hit`` that ``earlier`` can supply, as pieces
    ``(start in current, start in earlier, length)`` of at least ``min_run`` tokens each, end to
    end. The last token of ``current`` is never claimed (the engine samples from it). With
    ``recompute_tokens``, nothing is claimed unless the first piece's run began at least that
    many tokens before ``hit`` (those tokens were computed, seeing the new text before them)."""
    pieces, at, end = [], hit, len(current) - 1
    while at < end:
        best_start, best_length = -1, 0
        for start in index.get(tuple(current[at:at + min_run]), ()):
            length = min_run
            while (at + length < end and start + length < len(earlier)
                   and current[at + length] == earlier[start + length]):
                length += 1
            if length > best_length:
                best_start, best_length = start, length
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


def warmup_boundaries(earlier: list[int] | None, current: list[int], block_size: int, min_run: int,
                      recompute_tokens: int = 0, min_gain: int = 128) -> list[int]:
    """Where to cut ``current`` into warm-up stages (empty: none) so that a connector can claim
    reusable runs that new text separates. Stage k sends ``current[:boundary_k]``: the prefix
    cache holds everything up to the previous boundary, the connector claims the run from
    there (``claim_pieces``), the engine computes the rest up to the boundary, whose blocks then
    sit in the prefix cache for the next stage. The real request is the last stage. Each
    boundary is the block boundary past the previous claim from which the longest claim starts
    (greedy), taken only if that claim is at least ``min_gain`` tokens."""
    if not earlier:
        return []
    index = index_runs(earlier, min_run)
    same = 0
    while same < min(len(earlier), len(current)) and earlier[same] == current[same]:
        same += 1
    boundaries, start = [], same // block_size * block_size

    def claim(at: int) -> int:
        return claimed_tokens(claim_pieces(earlier, index, current, at, min_run, recompute_tokens))

    while True:
        computed_from = start + claim(start)  # the stage computes from here to its boundary
        first = (computed_from // block_size + 1) * block_size
        best_boundary, best = 0, 0
        for boundary in range(first, len(current) - 1, block_size):
            length = claim(boundary)
            if length > best:
                best_boundary, best = boundary, length
        if best < min_gain:
            return boundaries
        boundaries.append(best_boundary)
        start = best_boundary
