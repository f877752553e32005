"""Citation stubs and the Cited set.

A stub stands in the view for an observation that is not shown verbatim:

    §1f3a9c0d · cat secrets.txt · 5,210 chars · 87 lines · rc 0 · step 3
      head: THE NEEDLE FOR THIS TASK⏎…
      tail: …end of file⏎
      (_recall §1f3a9c0d for the full text)

Stub text is a pure function of the stored record, the preview sizes and the tokenizer, and
is capped at ``stub_max_tokens`` (previews shrink first), so every stub costs at most c
tokens and a catalog page of p stubs at most P. The bare form is just ``§id``.

``CitationBook`` issues stubs and keeps the Cited set: once an id has been shown as a
handle, every later view shows it with the same id and the same stub text (or the bare
form), never a new summary. Run ``python -m arc_vllm.core.citation`` for an example.
"""

from __future__ import annotations

from arc_vllm.core import formats
from arc_vllm.core.store import ObsRecord

SIGNATURE_CHARS = 60


def make_stub(record: ObsRecord, counter, head_chars: int, tail_chars: int, max_tokens: int) -> str:
    """The stub for ``record``, shrunk until it fits in ``max_tokens`` tokens."""
    signature_chars = SIGNATURE_CHARS
    while True:
        head = record.head[:head_chars]
        tail = record.tail[-tail_chars:] if tail_chars and record.tail else ""
        text = formats.stub(record, head, tail, signature_chars)
        if counter.count(text) <= max_tokens:
            return text
        if head_chars or tail_chars:
            head_chars, tail_chars = head_chars // 2, tail_chars // 2
        elif signature_chars > 8:
            signature_chars //= 2
        else:
            return formats.smallest_stub(record)


class CitationBook:
    """Issues stubs (cached: a stub's text never changes) and keeps the Cited set."""

    def __init__(self, store, counter, config):
        self.store = store
        self.counter = counter
        self.config = config
        self._stubs: dict[str, str] = {}
        self.cited: set[str] = set()

    def stub(self, id: str) -> str:
        text = self._stubs.get(id)
        if text is None:
            text = make_stub(self.store.get(id), self.counter, self.config.head_preview_chars,
                             self.config.tail_preview_chars, self.config.stub_max_tokens)
            self._stubs[id] = text
        return text

    def cite(self, id: str) -> str:
        """The stub, and ``id`` joins the Cited set."""
        self.cited.add(id)
        return self.stub(id)

    def state(self) -> dict:
        """Its part of a context's snapshot (``core/snapshot.py``): the Cited set (stubs are
        recomputed, identically, from the store)."""
        return {"cited": sorted(self.cited)}

    def restore(self, state: dict) -> None:
        self.cited = set(state["cited"])


if __name__ == "__main__":
    from arc_vllm.offline import go_offline

    go_offline()  # a process starts here: tiktoken's files from this project's cache
    from arc_vllm.core.config import ArcConfig
    from arc_vllm.core.store import ObsStore
    from arc_vllm.core.tokens import TiktokenCounter

    store = ObsStore()
    record = store.append("cat secrets.txt", "THE NEEDLE FOR THIS TASK\n" + "noise\n" * 500,
                          step=3, returncode=0)
    print(CitationBook(store, TiktokenCounter(), ArcConfig()).cite(record.id))
