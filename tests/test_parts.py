"""What a store holds of a session, and what changed since (``serving/sessions/parts.py``): over
random conversations (tool calls, text turns, resends, rewritten histories, compactions, a
records ring that turns over), the changes ``Written`` gives, applied to what was written, are
the session's growing parts exactly, and a request that only adds appends only what it added.
No store: a dict of lists stands for one.

    pytest tests/test_parts.py
"""

import json

from hypothesis import given, settings, strategies as st

from arc_vllm.core.config import ArcConfig
from arc_vllm.serving.sessions.parts import Written, encoded
from arc_vllm.serving.sessions.session import MAX_RECORDS, PARTS, Session, join_state, split_state

TASK = [{"role": "system", "content": "Agent."}, {"role": "user", "content": "Find it."}]


def tool(index: int, body: str) -> list[dict]:
    return [{"role": "assistant", "content": "", "tool_calls": [
        {"id": f"c{index}", "type": "function", "function": {"name": "cat", "arguments": json.dumps({"n": index})}}]},
        {"role": "tool", "tool_call_id": f"c{index}", "content": body}]


def apply(store: dict, changes) -> None:
    """The changes as a store applies them (rewrite or append; the records ring trimmed)."""
    for change in changes:
        if change.name == "cited":
            store["cited"] = set(change.items) if change.reset else store["cited"] | set(change.items)
            continue
        store[change.name] = list(change.items) if change.reset else store[change.name] + list(change.items)
        if change.name == "records":
            store["records"] = store["records"][-MAX_RECORDS:]


def live(session) -> dict:
    parts = session.growing()
    return {name: (set(items) if name == "cited" else encoded(name, items)) for name, items in parts.items()}


requests = st.lists(st.tuples(st.sampled_from(["more", "more", "more", "resend", "rewrite", "records"]),
                              st.integers(1, 4), st.integers(0, 3000)), min_size=1, max_size=20)


@settings(max_examples=40)
@given(requests=requests)
def test_the_changes_applied_to_what_was_written_are_the_session(smol, requests):
    session = Session("sess_" + "0" * 24, ArcConfig.for_window(2048, 256), smol)
    written = Written()
    store = {"fingerprints": [], "records": [], "turns": [], "catalog": [], "cited": set()}
    messages, count = list(TASK), 0
    for kind, steps, size in requests:
        if kind == "rewrite" and len(messages) > 4:  # the same first message, then another history
            messages = messages[:2] + [{"role": "assistant", "content": f"rewritten {count}"},
                                       {"role": "user", "content": "x" * size}]
        elif kind == "records":  # a ring that turns over between two writes
            for index in range(MAX_RECORDS + 3):
                session.records.append({"time": index, "count": count})
        elif kind != "resend":
            for _ in range(steps):
                messages += tool(count, f"line {count}\n" * (1 + size // 10))
                count += 1
        try:
            session.take_in(messages, None)
            session.context.render()
        except ValueError:  # a message that cannot fit: nothing taken in
            pass
        session.records.append({"time": count})
        before = {name: list(items) if name != "cited" else set(items) for name, items in store.items()}
        changes = written.changes(session)
        apply(store, changes)
        written.take(session, written.version + 1)
        assert store == live(session)
        if kind in ("more", "resend"):  # adding only: nothing rewritten, the old items kept as they were
            assert not [change.name for change in changes if change.reset and before[change.name]]
        # And the whole state, split and joined, is the session's state.
        rest, parts = split_state(json.loads(json.dumps(session.state())))
        assert join_state(rest, parts) == json.loads(json.dumps(session.state()))


def lists_in(value, path=()) -> dict:
    """Every list in a JSON state, by the keys leading to it."""
    if isinstance(value, list):
        return {path: value}
    if isinstance(value, dict):
        return {found: items for key, item in value.items() for found, items in lists_in(item, (*path, key)).items()}
    return {}


def test_every_list_of_the_state_that_grows_with_the_session_is_a_part(smol):
    """The table ``PARTS`` is the only place a growing part is named: a list that grows with the
    session's length and is not a part would be rewritten whole on every request by a store that
    appends (and a part the table lost would never be written)."""
    session = Session("sess_" + "0" * 24, ArcConfig.for_window(2048, 256), smol)
    messages, lengths = list(TASK), []
    for step in range(40):  # long enough for compactions, a catalog and a Cited set
        messages += tool(step, f"line {step}\n" * 60)
        session.take_in(messages, None)
        session.context.render()
        session.records.append({"time": step})
        lengths.append({path: len(items) for path, items in lists_in(json.loads(json.dumps(session.state()))).items()})
    grew = {path for path, length in lengths[-1].items() if length >= 10 + lengths[len(lengths) // 2].get(path, 0)}
    places = {part.place for part in PARTS}
    assert grew == places, (grew - places, places - grew)
    rest, parts = split_state(json.loads(json.dumps(session.state())))
    assert set(parts) == {part.name for part in PARTS} and all(parts.values())
    assert not set(lists_in(rest)) & places
