"""Recall: serving ``_recall`` / ``_recall_meta`` from the ObsStore, within the paper's limits.

- A valid recall materialises the stored text exactly into the recalled-content block U.
- A body over q tokens or over ``recall_max_chars`` comes back as exact, non-overlapping
  chunks of at most q tokens (of the body's own tokenisation) and at most
  ``recall_max_chars`` characters. There are ``ceil(n/q)`` of them when the character limit
  does not bind and no character is split across tokens at a cut (a cut never splits a
  character, which can add a chunk). Their concatenation is the body, always. A whole-body
  request for such a body serves chunk 1 and says how many follow.
- Limits: at most r recalls per step; ``recall_max_chars`` per recall (enforced by the chunk
  size, so every body stays recoverable); ``recall_budget_chars`` for all materialised text
  together, least-recently-used bodies falling back to stubs first.
  Each refusal names the limit and says how to proceed.
- An unknown id gets nearest-match suggestions from this store only (prefix, edit distance,
  signature), never a silent failure.

Run ``python -m arc_vllm.core.recall`` for a demonstration with o200k_base.
"""

from __future__ import annotations

import bisect
import math
from collections import OrderedDict

from arc_vllm.core import formats
from arc_vllm.core.commands import CommandResult, Recall, RecallMeta


def chunk_bounds(text: str, token_starts: list[int], q: int,
                 max_chars: int | None = None) -> list[tuple[int, int]]:
    """Character spans of the chunks of ``text``: at most ``q`` tokens and ``max_chars``
    characters each (a single longer token is the only exception), cut only between
    characters, covering ``text`` exactly once in order."""
    n = len(token_starts)
    if n == 0:
        return [(0, len(text))]
    bounds = []
    token = 0
    char = 0
    while token < n:
        end = min(token + q, n)
        if max_chars is not None and len(text) - char > max_chars:
            # Cut at the last token that starts within max_chars of this chunk's start.
            by_chars = bisect.bisect_right(token_starts, char + max_chars, token + 1, n) - 1
            end = max(token + 1, min(end, by_chars))
        # Several tokens may start inside one character (byte-level BPE); cut before it, or
        # after it when the character is the chunk's first (q >= 4 tokens holds any character).
        cut = end
        while cut < n and cut > token and token_starts[cut] <= token_starts[cut - 1]:
            cut -= 1
        if cut == token:
            cut = end
            while cut < n and token_starts[cut] <= token_starts[cut - 1]:
                cut += 1
        end = cut
        char_end = token_starts[end] if end < n else len(text)
        bounds.append((char, char_end))
        char, token = char_end, end
    return bounds


def edit_distance(a: str, b: str) -> int:
    previous = list(range(len(b) + 1))
    for i, left in enumerate(a, 1):
        current = [i]
        for j, right in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1,
                               previous[j - 1] + (left != right)))
        previous = current
    return previous[-1]


def suggest(query: str, store, limit: int = 3) -> list[str]:
    """Ids in ``store`` nearest to ``query``: by id prefix, then edit distance, then signature."""
    query = query.removeprefix("§").lower()
    ids = store.ids()
    matches = [id for id in ids if id.startswith(query) or (query.startswith(id) and query)]
    if not matches and query:
        scored = sorted((edit_distance(query, id[:len(query)]), id) for id in ids)
        matches = [id for distance, id in scored if distance <= max(2, len(query) // 4)]
    if not matches and query:
        matches = [record.id for record in store.records() if query in record.signature.lower()]
    return matches[:limit]


class RecallController:
    """Serves recall commands and owns the materialised set U (an LRU of (id, chunk) -> text)."""

    def __init__(self, store, book, counter, config):
        self.store = store
        self.book = book
        self.counter = counter
        self.config = config
        # U, least recently recalled first. Not a cachetools cache: a chunk larger than the whole
        # char budget is still admitted alone (``_materialize``), and a render that does not fit
        # evicts from it too (``evict_oldest``).
        self.materialized: OrderedDict[tuple[str, int | None], str] = OrderedDict()
        self._chunks: dict[str, list[tuple[int, int]]] = {}
        self._step = None
        self._recalls_this_step = 0
        self.num_recalls = 0
        self.num_refused = 0
        self.chunk_tokens = config.recall_chunk_tokens  # q; a large F makes it smaller

    def set_chunk_tokens(self, tokens: int) -> None:
        """Chunk at ``tokens`` from now on. Chunk numbers are only meaningful for one size,
        so a change (the tools in F changed) drops the chunking and what was materialised:
        those bodies fall back to their stubs and are recalled again in the new chunks."""
        if tokens != self.chunk_tokens:
            self.chunk_tokens = tokens
            self._chunks.clear()
            self.materialized.clear()

    def state(self) -> dict:
        """Its part of a context's snapshot (``core/snapshot.py``): U (ids, chunks and texts, in
        LRU order), this step's count and the counters (chunk bounds are recomputed)."""
        return {"materialized": [[id, chunk, text] for (id, chunk), text in self.materialized.items()],
                "recall": {"step": self._step, "this_step": self._recalls_this_step,
                           "num_recalls": self.num_recalls, "num_refused": self.num_refused}}

    def restore(self, state: dict) -> None:
        self.materialized.clear()
        for id, chunk, text in state["materialized"]:
            self.materialized[(id, chunk)] = text
        recall = state["recall"]
        self._step, self._recalls_this_step = recall["step"], recall["this_step"]
        self.num_recalls, self.num_refused = recall["num_recalls"], recall["num_refused"]

    def chunks(self, id: str) -> list[str]:
        """The exact chunks of a stored body (computed once per id)."""
        record = self.store.get(id)
        bounds = self._chunks.get(id)
        if bounds is None:
            bounds = chunk_bounds(record.content, self.counter.token_starts(record.content),
                                  self.chunk_tokens, self.config.recall_max_chars)
            self._chunks[id] = bounds
        return [record.content[start:end] for start, end in bounds]

    def num_chunks(self, id: str) -> int:
        if id not in self._chunks:
            self.chunks(id)
        return len(self._chunks[id])

    def execute(self, command, step: int) -> CommandResult:
        if self._step != step:
            self._step, self._recalls_this_step = step, 0
        if self._recalls_this_step >= self.config.recalls_per_step:
            return self._refuse(formats.recall_limit(self.config.recalls_per_step))
        if command.id not in self.store:
            return self._refuse(formats.recall_unknown(command.id, suggest(command.id, self.store)))
        record = self.store.get(command.id)
        if isinstance(command, RecallMeta):
            self._count(record, step)
            return CommandResult(True, self.book.cite(record.id))
        assert isinstance(command, Recall)
        total = self.num_chunks(record.id)
        chunk = command.chunk
        if chunk is not None and chunk > total:
            return self._refuse(formats.recall_no_chunk(record.id, total))
        if chunk is None and total > 1:
            chunk = 1  # too large for one recall: serve the first chunk and say what follows
        self._count(record, step)
        # A body of one chunk has one key, whether asked for whole or as chunk 1: the same
        # text must never be in U twice, nor Q spent on it twice.
        key = (record.id, chunk if total > 1 else None)
        text = self.chunks(record.id)[chunk - 1] if chunk and total > 1 else record.content
        self._materialize(key, text)
        self.book.cite(record.id)
        if key[1] is None:
            return CommandResult(True, formats.recalled_whole(record.id, record.chars), key)
        return CommandResult(True, formats.recalled_chunk(record.id, chunk, total, len(text)), key)

    def _count(self, record, step: int) -> None:
        self._recalls_this_step += 1
        self.num_recalls += 1
        self.store.note_recall(record.id, step)

    def _refuse(self, text: str) -> CommandResult:
        self.num_refused += 1
        return CommandResult(False, text)

    def _materialize(self, key, text: str) -> None:
        self.materialized.pop(key, None)
        budget = self.config.recall_budget_chars
        used = sum(len(body) for body in self.materialized.values())
        # Least recently used bodies fall back to their stubs first. A chunk larger than the
        # whole char budget is still admitted alone: q tokens always fit in Q.
        while self.materialized and used + len(text) > budget:
            _, evicted = self.materialized.popitem(last=False)
            used -= len(evicted)
        self.materialized[key] = text

    def label(self, key) -> str:
        id, chunk = key
        return formats.recalled_label(id, chunk, self.num_chunks(id) if chunk else 1)

    def evict_oldest(self) -> None:
        self.materialized.popitem(last=False)


def recall_all(controller: RecallController, id: str) -> str:
    """The stored body as recall serves it: the chunks that ``_recall §id chunk k`` answers
    carry (``chunks``, each exactly the text a view then shows), joined. Replay's "recovered
    exactly" compares this with the observation the agent saw."""
    return "".join(controller.chunks(id))


if __name__ == "__main__":
    from arc_vllm.offline import go_offline

    go_offline()  # a process starts here: tiktoken's files from this project's cache
    from arc_vllm.core.citation import CitationBook
    from arc_vllm.core.config import ArcConfig
    from arc_vllm.core.store import ObsStore
    from arc_vllm.core.tokens import TiktokenCounter

    config, counter, store = ArcConfig(), TiktokenCounter(), ObsStore()
    body = "".join(f"line {i}: {'xyz ' * 20}\n" for i in range(2000))
    record = store.append("cat big.log", body, step=1)
    controller = RecallController(store, CitationBook(store, counter, config), counter, config)
    print(controller.execute(Recall(record.id), step=2).text)
    print(controller.execute(Recall(record.id[:6] + "zz"), step=2).text)
    n = counter.count(body)
    print(f"{n} tokens, q={controller.chunk_tokens}: {controller.num_chunks(record.id)} chunks "
          f"(ceil = {math.ceil(n / controller.chunk_tokens)}), exact: "
          f"{recall_all(controller, record.id) == body}")
