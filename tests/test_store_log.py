"""The durable store: rebuild on open, torn tails, corruption, foreign files, fsync policies."""

import os

import pytest
from hypothesis import given, settings, strategies as st

from arc_vllm.core.store import ObsStore
from arc_vllm.core.store_log import FSYNC_POLICIES, StoreCorruptError, StoreFormatError, StoreLockedError

histories = st.lists(st.tuples(st.sampled_from(["cat a", "cat b", "grep x"]),
                               st.text(max_size=200)), max_size=40)


@settings(max_examples=40)
@given(histories)
def test_history_rebuilds_after_reopen(tmp_path_factory, pairs):
    """Property 3 (durable): store + occurrence log give the ordered history back exactly."""
    path = tmp_path_factory.mktemp("s") / "store.arc"
    with ObsStore.open(path, fsync="never") as store:
        for step, (signature, observation) in enumerate(pairs):
            store.append(signature, observation, step=step, returncode=step % 3 or None)
        ids = store.ids()
        occurrences = list(store.occurrences)
    with ObsStore.open(path) as reopened:
        assert reopened.history() == [observation for _, observation in pairs]
        assert reopened.occurrences == occurrences and reopened.ids() == ids
        for step, (signature, observation) in enumerate(pairs):
            record = reopened.get(occurrences[step][1])
            assert (record.signature, record.content) == (signature, observation)


def _store_with_records(path, count=3):
    with ObsStore.open(path, fsync="never") as store:
        for step in range(count):
            store.append(f"cat f{step}", f"body {step} é😀\x00" * (step + 1), step=step, returncode=0)
        store.append("cat f0", "body 0 é😀\x00", step=count)  # a repeat occurrence record
        return list(store.occurrences)


def _last_frame_start(path):
    from arc_vllm.core.store_log import FRAME, HEADER, _read_frame
    data = path.read_bytes()
    offset, last = HEADER.size, HEADER.size
    while offset < len(data):
        last = offset
        offset = _read_frame(data, offset, len(data))[1]
    assert offset == len(data) and FRAME.size
    return last, data


@pytest.mark.parametrize("last_kind", ["new", "repeat"])
def test_torn_tail_at_every_offset_keeps_every_earlier_record(tmp_path, last_kind):
    """Property 7: cut the file at every byte of its last record; reopen never raises, never
    returns the torn record, keeps every earlier record byte-identical."""
    path = tmp_path / "store.arc"
    occurrences = _store_with_records(path)
    if last_kind == "new":
        with ObsStore.open(path, fsync="never") as store:
            store.append("cat last", "the last record\n" * 20, step=99)
        occurrences = occurrences + [(99, None)]
    start, data = _last_frame_start(path)
    with ObsStore.open(path) as intact:
        expected = {id: intact.get(id).content for id in intact.ids()}
    for cut in range(start, len(data)):
        path.write_bytes(data[:cut])
        with pytest.warns(UserWarning, match="torn tail") if cut > start else _no_warning():
            with ObsStore.open(path) as store:
                assert store.occurrences == occurrences[:-1]
                for id in store.ids():
                    assert store.get(id).content == expected[id]
        assert path.stat().st_size == start  # the torn bytes are gone, the rest untouched
        assert path.read_bytes() == data[:start]


def test_flipped_bytes_in_last_record_are_cut_never_returned(tmp_path):
    path = tmp_path / "store.arc"
    _store_with_records(path)
    with ObsStore.open(path, fsync="never") as store:
        store.append("cat last", "the last record body", step=50)
    start, data = _last_frame_start(path)
    for position in range(start, len(data)):
        flipped = bytearray(data)
        flipped[position] ^= 0x5A
        path.write_bytes(bytes(flipped))
        with pytest.warns(UserWarning, match="torn tail"):
            with ObsStore.open(path) as store:
                assert "the last record body" not in store.history()
                assert len(store) == 3
        assert path.read_bytes() == data[:start]


def test_damage_before_the_tail_refuses_to_open_and_changes_nothing(tmp_path):
    path = tmp_path / "store.arc"
    _store_with_records(path)
    data = path.read_bytes()
    damaged = bytearray(data)
    damaged[40] ^= 0xFF  # inside the first record's payload
    path.write_bytes(bytes(damaged))
    with pytest.raises(StoreCorruptError, match="refusing to open"):
        ObsStore.open(path)
    assert path.read_bytes() == bytes(damaged)


def test_foreign_file_and_other_version_fail_clearly_and_stay_unchanged(tmp_path):
    foreign = tmp_path / "notes.txt"
    foreign.write_bytes(b"just some text that is long enough to have a header\n")
    with pytest.raises(StoreFormatError, match="not an arc-vllm store"):
        ObsStore.open(foreign)
    assert foreign.read_bytes() == b"just some text that is long enough to have a header\n"
    tiny = tmp_path / "tiny"
    tiny.write_bytes(b"xy")
    with pytest.raises(StoreFormatError):
        ObsStore.open(tiny)
    assert tiny.read_bytes() == b"xy"
    path = tmp_path / "store.arc"
    _store_with_records(path)
    data = bytearray(path.read_bytes())
    data[8] = 7  # format version 7
    path.write_bytes(bytes(data))
    with pytest.raises(StoreFormatError, match="format version 7"):
        ObsStore.open(path)
    assert path.read_bytes() == bytes(data)


def test_one_writer_per_file(tmp_path):
    path = tmp_path / "store.arc"
    with ObsStore.open(path):
        with pytest.raises(StoreLockedError):
            ObsStore.open(path)
    ObsStore.open(path).close()


@pytest.mark.parametrize("policy", FSYNC_POLICIES)
def test_every_fsync_policy_persists_on_close(tmp_path, policy):
    path = tmp_path / f"{policy}.arc"
    with ObsStore.open(path, fsync=policy) as store:
        record = store.append("echo", "x" * 1000, step=1)
    with ObsStore.open(path) as store:
        assert store.get(record.id).content == "x" * 1000
    with pytest.raises(ValueError, match="fsync"):
        ObsStore.open(tmp_path / "bad.arc", fsync="sometimes")


def test_huge_observation_survives_reopen(tmp_path):
    path = tmp_path / "big.arc"
    body = "é" * 30_000_000 + "\x00end"
    with ObsStore.open(path, fsync="never") as store:
        id = store.append("cat big", body, step=1).id
    with ObsStore.open(path) as store:
        assert store.get(id).content == body
    assert os.path.getsize(path) > 60_000_000


class _no_warning:
    def __enter__(self):
        import warnings
        self._catch = warnings.catch_warnings()
        self._catch.__enter__()
        warnings.simplefilter("error")

    def __exit__(self, *exc):
        self._catch.__exit__(*exc)


def test_a_released_store_is_taken_back_unchanged_or_reported_changed(tmp_path):
    """One writer at a time across processes: release hands the file over; reacquire says
    whether anyone wrote meanwhile (then the caller reads it afresh)."""
    from arc_vllm.core.store import ObsStore

    path = tmp_path / "store.arc"
    mine = ObsStore.open(path)
    mine.append("cat a", "first body", step=1)
    mine.release()
    assert mine.reacquire(timeout_s=1)  # nobody wrote: appends continue where they were
    mine.append("cat b", "second body", step=2)
    mine.release()
    theirs = ObsStore.open(path)  # another writer takes it (a second process would)
    assert theirs.history() == ["first body", "second body"]
    theirs.append("cat c", "third body", step=3)
    with pytest.raises(StoreLockedError):
        mine.reacquire(timeout_s=0.05)  # still held by the other writer
    theirs.release()
    assert not mine.reacquire(timeout_s=1)  # changed under it: it must be reopened
    mine.close()
    assert ObsStore.open(path).history() == ["first body", "second body", "third body"]
