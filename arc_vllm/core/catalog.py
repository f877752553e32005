"""The citation catalog: the stub of every observation that has left the verbatim view,
kept outside the prompt and shown one page at a time.

An observation joins the catalog when compaction moves its turn out of the recent suffix
(observations still shown verbatim need no handle yet), so every observation not shown in
full has its stub here, and the catalog changes only at a compaction: between compactions
the page in the view is byte-identical, which keeps the engine's prefix cache warm.

The view shows the current page as G, but not page 1 while S shows every stub it holds
(``ArcContext._page``): that page would only repeat S.

Stub j (order of entry, 1-based) is on page ceil(j/p) and on no other page; a page holds at
most p stubs (``ArcConfig.stubs_per_page``; fewer when a large task prefix shrinks P, see
``core/budget.py``) of at most ``stub_max_tokens`` each plus a header, so it costs at most P
tokens. From page 1, ``_catalog next`` reaches stub j within ceil(j/p)
pages. Pages only ever gain stubs at the end, so a full page's text never changes.

Run ``python -m arc_vllm.core.catalog`` to print the pages of a small example.
"""

from __future__ import annotations

import math

from arc_vllm.core.commands import CatalogNext, CatalogPage, CommandResult
from arc_vllm.core import formats


class Catalog:
    def __init__(self, book, config):
        self.book = book
        self.per_page = config.stubs_per_page
        self.current = 1
        self.entries: list[str] = []
        self._position: dict[str, int] = {}

    def set_per_page(self, per_page: int) -> None:
        """Page at ``per_page`` stubs from now on (a large F shows fewer at a time)."""
        self.per_page = per_page
        self.current = min(self.current, self.num_pages)

    def add(self, id: str) -> None:
        """Append ``id``'s stub (once; later adds of the same id change nothing)."""
        if id not in self._position:
            self._position[id] = len(self.entries)
            self.entries.append(id)

    def __contains__(self, id: str) -> bool:
        return id in self._position

    def state(self) -> dict:
        """Its part of a context's snapshot (``core/snapshot.py``): the order and the page."""
        return {"catalog": {"entries": list(self.entries), "current": self.current}}

    def restore(self, state: dict) -> None:
        """Put back what ``state`` wrote (of a snapshot holding it)."""
        self.entries = list(state["catalog"]["entries"])
        self._position = {id: position for position, id in enumerate(self.entries)}
        self.current = state["catalog"]["current"]

    def __len__(self) -> int:
        return len(self.entries)

    @property
    def num_pages(self) -> int:
        return max(1, math.ceil(len(self.entries) / self.per_page))

    def page_ids(self, page: int) -> list[str]:
        return self.entries[(page - 1) * self.per_page: page * self.per_page]

    def render(self, page: int | None = None) -> str:
        """The text of one page ('' while the store is empty); every stub shown is cited."""
        page = self.current if page is None else page
        ids = self.page_ids(page)
        if not ids:
            return ""
        first = (page - 1) * self.per_page + 1
        footer = formats.catalog_footer(page, self.num_pages, first, first + len(ids) - 1, len(self.entries))
        return "\n".join([*(self.book.cite(id) for id in ids), footer])

    def execute(self, command) -> CommandResult:
        if isinstance(command, CatalogNext):
            if self.current >= self.num_pages:
                self.current = 1
                return CommandResult(True, formats.catalog_wrapped(self.num_pages))
            self.current += 1
            return CommandResult(True, formats.catalog_shown(self.current, self.num_pages))
        assert isinstance(command, CatalogPage)
        if command.page > self.num_pages:
            return CommandResult(False, formats.catalog_no_page(command.page, self.num_pages))
        self.current = command.page
        return CommandResult(True, formats.catalog_shown(self.current, self.num_pages))


if __name__ == "__main__":
    from arc_vllm.offline import go_offline

    go_offline()  # a process starts here: tiktoken's files from this project's cache
    from arc_vllm.core.citation import CitationBook
    from arc_vllm.core.config import ArcConfig
    from arc_vllm.core.store import ObsStore
    from arc_vllm.core.tokens import TiktokenCounter

    config, store = ArcConfig(catalog_budget_tokens=400, stub_max_tokens=100), ObsStore()
    for step in range(7):
        store.append(f"cat file{step}.txt", f"contents of file {step}\n" * 30, step=step)
    catalog = Catalog(CitationBook(store, TiktokenCounter(), config), config)
    for id in store.ids():
        catalog.add(id)
    for page in range(1, catalog.num_pages + 1):
        print(catalog.render(page), end="\n\n")
