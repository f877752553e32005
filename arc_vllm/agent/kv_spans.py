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

Pure token arithmetic; ``agent.replay`` records both for every call.
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
