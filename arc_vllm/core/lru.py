"""A least-recently-used cache bounded by the characters its keys hold.

The token caches key on text (prompt segments, message contents, stubs): a count is a few
bytes, the key may be a whole observation, so the bound is on the keys' characters.

    cache = CharBoundedLRU(max_chars=4_000_000)
    value = cache.get(key)            # None when absent; a hit becomes the most recent
    cache.put(key, value, chars)      # evicts the least recently used beyond max_chars

Run ``python -m arc_vllm.core.lru`` for a small example.
"""

from __future__ import annotations

from collections import OrderedDict


class CharBoundedLRU:
    def __init__(self, max_chars: int):
        self.max_chars = max_chars
        self._items: OrderedDict = OrderedDict()   # key -> (value, chars)
        self._chars = 0

    def get(self, key):
        item = self._items.get(key)
        if item is None:
            return None
        self._items.move_to_end(key)
        return item[0]

    def put(self, key, value, chars: int) -> None:
        previous = self._items.pop(key, None)
        if previous is not None:
            self._chars -= previous[1]
        self._items[key] = (value, chars)
        self._chars += chars
        while self._chars > self.max_chars and len(self._items) > 1:
            _, (_, evicted_chars) = self._items.popitem(last=False)
            self._chars -= evicted_chars

    def __len__(self) -> int:
        return len(self._items)


if __name__ == "__main__":
    cache = CharBoundedLRU(max_chars=10)
    for word in ("alpha", "beta", "gamma"):
        cache.put(word, len(word), len(word))
    print(cache.get("alpha"), cache.get("gamma"), len(cache))
