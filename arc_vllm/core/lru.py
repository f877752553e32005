"""A least-recently-used cache bounded by the characters its keys hold: ``cachetools.LRUCache``
with each entry sized by its key.

The token caches key on text (prompt segments, message contents, stubs): a count is a few
bytes, the key may be a whole observation, so the bound is on the keys' characters.
cachetools sizes an entry by its value (``getsizeof``), so each value is kept beside the size
of its key; an entry larger than the whole bound is not cached (cachetools would refuse it).

    cache = CharBoundedLRU(max_chars=4_000_000)
    value = cache.get(key)            # None when absent; a hit becomes the most recent
    cache.put(key, value, chars)      # evicts the least recently used beyond max_chars

Run ``python -m arc_vllm.core.lru`` for a small example.
"""

from __future__ import annotations

from operator import itemgetter

from cachetools import LRUCache


class CharBoundedLRU:
    """``max_items``, where given, bounds the number of entries too (the least recent leave)."""

    def __init__(self, max_chars: int, max_items: int | None = None):
        self._items = LRUCache(maxsize=max_chars, getsizeof=itemgetter(1))  # key -> (value, chars)
        self.max_items = max_items

    @property
    def max_chars(self) -> int:
        return self._items.maxsize

    def get(self, key):
        item = self._items.get(key)
        return None if item is None else item[0]

    def put(self, key, value, chars: int) -> None:
        if chars <= self._items.maxsize:
            self._items[key] = (value, chars)
            while self.max_items is not None and len(self._items) > self.max_items:
                self._items.popitem()

    def __len__(self) -> int:
        return len(self._items)


if __name__ == "__main__":
    cache = CharBoundedLRU(max_chars=10)
    for word in ("alpha", "beta", "gamma"):
        cache.put(word, len(word), len(word))
    print(cache.get("alpha"), cache.get("gamma"), len(cache))
