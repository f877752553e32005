"""Recall: exact bodies and chunks, limits with instructions, suggestions, LRU fall-back."""

import math

from hypothesis import given, settings, strategies as st

from arc_vllm.core.citation import CitationBook
from arc_vllm.core.commands import Recall, RecallMeta
from arc_vllm.core.config import ArcConfig
from arc_vllm.core.recall import RecallController, chunk_bounds, recall_all, suggest
from arc_vllm.core.store import ObsStore


def controller_for(counter, **overrides):
    config = ArcConfig(**overrides)
    store = ObsStore()
    return RecallController(store, CitationBook(store, counter, config), counter, config), store


bodies = st.one_of(st.text(max_size=3000),
                   st.text(alphabet="ab é😀漢\n\x00 ", max_size=3000),
                   st.integers(0, 60_000).map(lambda n: ("word " * n)[:n]))


@settings(max_examples=60)
@given(body=bodies, q=st.integers(4, 300), max_chars=st.one_of(st.none(), st.integers(64, 5000)))
def test_chunks_are_exact_bounded_and_ceil_n_over_q(smol, body, q, max_chars):
    """Property 2: the chunks concatenate to the body; each carries at most q of the body's
    tokens and at most max_chars characters; there are ceil(n/q) of them unless the character
    limit binds or a character is split across tokens at a cut."""
    starts = smol.token_starts(body)
    bounds = chunk_bounds(body, starts, q, max_chars)
    assert "".join(body[a:b] for a, b in bounds) == body
    assert bounds[0][0] == 0 and bounds[-1][1] == len(body)
    assert all(left[1] == right[0] for left, right in zip(bounds, bounds[1:]))
    n = len(starts)
    for a, b in bounds:
        tokens_in_chunk = sum(1 for start in starts if a <= start < b) if b > a else 0
        assert tokens_in_chunk <= q
        if max_chars is not None and tokens_in_chunk > 1:
            assert b - a <= max_chars
    split_chars = sum(1 for i in range(1, n) if starts[i] <= starts[i - 1])
    assert len(bounds) >= max(1, math.ceil(n / q))
    if split_chars == 0 and max_chars is None:
        assert len(bounds) == max(1, math.ceil(n / q))


def test_every_body_is_recoverable_through_recall_commands(smol):
    controller, store = controller_for(smol, recall_chunk_tokens=64, recall_budget_chars=4000,
                                       recall_max_chars=2000)
    body = "".join(f"{i}: é😀 line of log output\n" for i in range(600))
    record = store.append("cat log", body, step=1)
    total = controller.num_chunks(record.id)
    assert total == math.ceil(smol.count(body) / 64) > 1  # q-token chunks, in the model's own tokens
    rebuilt = []
    for chunk in range(1, total + 1):
        result = controller.execute(Recall(record.id, chunk), step=10 + chunk)
        assert result.ok, result.text
        rebuilt.append(controller.materialized[(record.id, chunk)])
    assert "".join(rebuilt) == body == recall_all(controller, record.id)


def test_whole_recall_of_large_body_serves_chunk_one_and_says_what_follows(smol):
    controller, store = controller_for(smol, recall_chunk_tokens=64)
    record = store.append("cat log", "data " * 500, step=1)
    result = controller.execute(Recall(record.id), step=2)
    assert result.ok and "chunk 1/" in result.text and f"_recall §{record.id} 2" in result.text


def test_small_body_comes_back_whole_and_exact(smol):
    controller, store = controller_for(smol)
    record = store.append("cat s", "NEEDLE=ABC\x00é\n", step=1)
    assert controller.execute(Recall(record.id), step=2).ok
    assert controller.materialized[(record.id, None)] == "NEEDLE=ABC\x00é\n"
    assert store.recall_stats(record.id) == (1, 2)


def test_per_step_limit_refuses_and_says_how_to_proceed(smol):
    controller, store = controller_for(smol)
    ids = [store.append("cat", f"body {i}", step=i).id for i in range(3)]
    assert controller.execute(Recall(ids[0]), step=5).ok
    assert controller.execute(Recall(ids[1]), step=5).ok
    refused = controller.execute(Recall(ids[2]), step=5)
    assert not refused.ok and "r=2" in refused.text and "next step" in refused.text
    assert controller.execute(Recall(ids[2]), step=6).ok


def test_chunk_out_of_range_says_the_range(smol):
    controller, store = controller_for(smol)
    record = store.append("cat", "short", step=1)
    result = controller.execute(Recall(record.id, 3), step=2)
    assert not result.ok and "1..1" in result.text


def test_unknown_id_suggests_the_nearest_in_this_store_only(smol):
    controller, store = controller_for(smol)
    record = store.append("cat secrets.txt", "x", step=1)
    other_controller, other_store = controller_for(smol)
    other_store.append("cat elsewhere", "y", step=1)
    typo = record.id[:6] + ("0" if record.id[6] != "0" else "1") + record.id[7]
    result = controller.execute(Recall(typo), step=2)
    assert not result.ok and f"§{record.id}" in result.text
    assert suggest(record.id[:5], store) == [record.id]
    assert suggest("secrets", store) == [record.id]
    assert suggest(record.id, other_store) == []  # another store's ids are never suggested
    assert "_catalog next" in other_controller.execute(Recall("zzzz"), step=2).text


def test_recall_meta_returns_only_the_stub(smol):
    controller, store = controller_for(smol)
    record = store.append("cat big", "payload line\n" * 400, step=1)
    result = controller.execute(RecallMeta(record.id), step=2)
    assert result.ok and result.text.startswith(f"§{record.id}") and len(result.text) < 600
    assert controller.materialized == {}


def test_lru_bodies_fall_back_to_stubs_within_the_char_budget(smol):
    controller, store = controller_for(smol, recall_budget_chars=2500, recall_max_chars=1000)
    ids = [store.append("cat", f"{i}" * 1000, step=i).id for i in range(4)]
    for step, id in enumerate(ids, start=10):
        assert controller.execute(Recall(id), step=step).ok
    assert [key[0] for key in controller.materialized] == ids[2:]
    assert sum(map(len, controller.materialized.values())) <= 2500
    controller.execute(Recall(ids[2]), step=20)  # refresh: now most recently used
    controller.execute(Recall(ids[0]), step=21)
    assert [key[0] for key in controller.materialized] == [ids[2], ids[0]]


def test_whole_recall_over_max_chars_is_served_in_chunks(smol):
    controller, store = controller_for(smol, recall_max_chars=100, recall_budget_chars=200)
    body = "zebra " * 40  # 240 chars: far under q tokens, over recall_max_chars
    record = store.append("cat", body, step=1)
    assert controller.num_chunks(record.id) == 3
    assert all(len(chunk) <= 100 for chunk in controller.chunks(record.id))
    result = controller.execute(Recall(record.id), step=2)
    assert result.ok and "chunk 1/3" in result.text
    assert controller.materialized[(record.id, 1)] == controller.chunks(record.id)[0]
    assert "".join(controller.chunks(record.id)) == body


def test_a_one_chunk_body_asked_whole_then_as_chunk_1_is_in_u_once(smol):
    """Review defect: `_recall §id` then `_recall §id 1` put the same text in U twice."""
    from arc_vllm.core.config import ArcConfig
    from arc_vllm.core.context import ArcContext

    context = ArcContext(ArcConfig.for_window(4096, 512), smol, task="t")
    record = context.observe("cat a.txt", "alpha beta gamma\n" * 20)
    assert context.recall.num_chunks(record.id) == 1
    context.act(f"_recall §{record.id}")
    context.act(f"_recall §{record.id} 1")
    assert list(context.recall.materialized) == [(record.id, None)]
    assert context.render().messages[-1]["content"].count("alpha beta gamma\n" * 20) == 1
