"""ObsStore: content addressing, visible-id extension, occurrence log, bad input, big bodies."""

import hashlib
import tracemalloc

import pytest
from hypothesis import given, strategies as st

from arc_vllm.core.store import ObsStore, UnknownObservation


def test_id_is_sha1_of_signature_unit_separator_observation():
    store = ObsStore()
    record = store.append("cat a.txt", "hello\n", step=1, returncode=0)
    full = hashlib.sha1(b"cat a.txt" + b"\x1f" + b"hello\n").hexdigest()
    assert record.full_id == full and record.id == full[:8]
    assert (record.chars, record.lines, record.returncode, record.step) == (6, 1, 0, 1)


def test_same_pair_same_id_and_every_occurrence_logged():
    store = ObsStore()
    first = store.append("ls", "a b", step=1)
    second = store.append("ls", "a b", step=5)
    other = store.append("ls -l", "a b", step=6)  # same text, other action: other id
    assert first is second and other.id != first.id
    assert store.occurrences == [(1, first.id), (5, first.id), (6, other.id)]
    assert store.history() == ["a b", "a b", "a b"] and len(store) == 2


@given(st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.text(max_size=30)), max_size=120))
def test_forced_visible_id_collisions_give_distinct_stable_ids(pairs):
    """Property 4: with 1-hex-char visible ids nearly everything collides; ids stay distinct,
    extend by the configured step, never change, and the same pair keeps its id."""
    store = ObsStore(visible_id_chars=1, id_extend_chars=4)
    given_ids = {}
    for step, (signature, observation) in enumerate(pairs):
        record = store.append(signature, observation, step=step)
        key = (signature, observation)
        if key in given_ids:
            assert record.id == given_ids[key]
        given_ids[key] = record.id
        assert record.full_id.startswith(record.id) and (len(record.id) - 1) % 4 == 0
    ids = list(given_ids.values())
    assert len(set(ids)) == len(ids)
    for (signature, observation), id in given_ids.items():
        assert store.get(id).content == observation and store.get(id).signature == signature
    assert store.history() == [observation for _, observation in pairs]


@pytest.mark.parametrize("observation", ["", "a\nb\r\nc", "\x00nul\x00", "é漢字😀\u200d\U0010fffd",
                                         "\ufeffbom", "_recall §abcdef12"])
def test_any_text_round_trips(observation):
    store = ObsStore()
    record = store.append("tool", observation, step=0)
    assert store.get(record.id).content == observation


def test_utf8_bytes_are_stored_as_their_text_and_other_input_is_refused():
    store = ObsStore()
    record = store.append("tool", "é😀".encode(), step=0)
    assert record.content == "é😀" and record.content.encode() == "é😀".encode()
    with pytest.raises(ValueError, match="not valid UTF-8"):
        store.append("tool", b"\xff\xfe", step=1)
    with pytest.raises(ValueError, match="lone surrogate"):
        store.append("tool", "a\ud800b", step=1)
    with pytest.raises(TypeError, match="observation must be str"):
        store.append("tool", 42, step=1)
    with pytest.raises(TypeError, match="signature must be str"):
        store.append(None, "x", step=1)
    with pytest.raises(TypeError, match="step"):
        store.append("tool", "x", step="1")
    assert len(store) == 1 and store.occurrences == [(0, record.id)]


def test_unknown_id_is_a_clear_key_error():
    with pytest.raises(UnknownObservation, match="no observation §deadbeef"):
        ObsStore().get("deadbeef")


def test_huge_observation_round_trips_without_extra_copies():
    body = ("0123456789abcdef" * 64 + "\n") * 100_000  # ~104 MB
    store = ObsStore()
    tracemalloc.start()
    record = store.append("cat huge.log", body, step=1)
    current, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert store.get(record.id).content is body  # the store keeps the caller's text, no copy
    assert current < 1_000_000  # what stays allocated is metadata, not a second body
    assert record.lines == 100_000


def test_the_archive_grows_by_the_payload_only(tmp_path):
    """The paper's fourth guarantee: a new observation adds its payload (and its record) to the
    durable file; the same observation again adds no payload, only its occurrence record, so
    the file grows by the same small amount whatever the body's size."""
    store = ObsStore.open(tmp_path / "store.arc")
    path = tmp_path / "store.arc"
    sizes = [path.stat().st_size]
    body = "line of a long log\n" * 5000
    store.append("cat big.log", body, step=1)
    sizes.append(path.stat().st_size)
    store.append("cat big.log", body, step=2)
    sizes.append(path.stat().st_size)
    store.append("cat big.log", body, step=3)
    sizes.append(path.stat().st_size)
    store.append("cat small.log", "x", step=4)
    sizes.append(path.stat().st_size)
    store.append("cat small.log", "x", step=5)
    sizes.append(path.stat().st_size)
    new, again, again_2, new_small, again_small = [b - a for a, b in zip(sizes, sizes[1:])]
    assert new >= len(body.encode())  # the payload, once
    assert again == again_2 == again_small < 200  # an occurrence record, the same for any body
    assert new_small >= 1 and new - len(body.encode()) <= new_small + 100
    assert store.num_payload_bytes == len(body.encode()) + 1
    store.close()
    reopened = ObsStore.open(path)
    assert reopened.history() == [body] * 3 + ["x"] * 2
