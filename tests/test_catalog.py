"""The catalog: every stub on exactly one page, pages within P, reached within ceil(j/p)."""

import math

from hypothesis import given, settings, strategies as st

from arc_vllm.core.catalog import Catalog
from arc_vllm.core.citation import CitationBook
from arc_vllm.core.commands import CatalogNext, CatalogPage
from arc_vllm.core.config import ArcConfig
from arc_vllm.core.store import ObsStore


@settings(max_examples=25)
@given(observations=st.lists(st.text(min_size=0, max_size=400), max_size=80),
       page_budget=st.integers(200, 900))
def test_every_stub_on_exactly_one_page_within_budget(smol, observations, page_budget):
    """Property 5."""
    config = ArcConfig(catalog_budget_tokens=page_budget, stub_max_tokens=100)
    store = ObsStore()
    for step, observation in enumerate(observations):
        store.append(f"tool {step % 7}", observation, step=step)
    book = CitationBook(store, smol, config)
    catalog = Catalog(book, config)
    for id in store.ids():
        catalog.add(id)
        catalog.add(id)  # adding twice changes nothing
    p = config.stubs_per_page
    seen = {}
    for page in range(1, catalog.num_pages + 1):
        text = catalog.render(page)
        assert smol.count(text) <= page_budget
        for id in catalog.page_ids(page):
            assert book.stub(id) in text
            assert id not in seen
            seen[id] = page
    assert set(seen) == set(store.ids())
    # From page 1, `_catalog next` reaches stub j within ceil(j/p) pages.
    catalog.current = 1
    for j, id in enumerate(store.ids(), start=1):
        pages_shown = 1
        catalog.current = 1
        while id not in catalog.page_ids(catalog.current):
            catalog.execute(CatalogNext())
            pages_shown += 1
        assert pages_shown <= math.ceil(j / p)


def test_page_commands_and_their_errors(smol):
    config = ArcConfig(catalog_budget_tokens=300, stub_max_tokens=100)
    store = ObsStore()
    for step in range(5):
        store.append("ls", f"listing {step}", step=step)
    catalog = Catalog(CitationBook(store, smol, config), config)
    for id in store.ids():
        catalog.add(id)
    assert catalog.num_pages == math.ceil(5 / config.stubs_per_page)
    assert not catalog.execute(CatalogPage(99)).ok
    assert catalog.execute(CatalogPage(catalog.num_pages)).ok
    assert catalog.execute(CatalogNext()).text.startswith("catalog: wrapped")
    assert catalog.current == 1
