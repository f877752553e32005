"""Sessions end (``serving/sessions/manager.py``): an idle TTL and an in-memory cap. With a
store folder an ended session is unloaded and its next request reloads it exactly (the same
view, every observation); without one it is gone and answers 410. A session serving a
request is never ended under it. The embedded model's tokenizer; served in
``tests/test_serving.py``.

    pytest tests/test_session_manager.py
"""

import json
import time

import pytest

from arc_vllm.core import formats

from arc_vllm.serving.sessions.places import storage_for
from arc_vllm.serving.sessions.manager import SessionManager
from arc_vllm.serving.errors import SessionError

pytestmark = pytest.mark.anyio  # the manager's storage calls are coroutines


def conversation(count: int) -> list[dict]:
    messages = [{"role": "user", "content": "Check the logs."}]
    for index in range(count):
        messages += [{"role": "assistant", "content": "", "tool_calls": [
            {"id": f"c{index}", "type": "function", "function": {"name": "cat", "arguments": str(index)}}]},
            {"role": "tool", "tool_call_id": f"c{index}", "content": f"log {index} line\n" * (30 + index)}]
    return messages


async def test_an_idle_session_without_a_store_ends_and_answers_410(smol):
    manager = SessionManager(smol, 4096, {}, ttl_s=60)
    idle, busy = await manager.create(), await manager.create()
    later = time.time() + 61
    async with manager.using(busy.id):
        manager.sweep(now=later)  # busy is serving a request: it stays
    assert busy.id in manager.sessions and idle.id not in manager.sessions
    with pytest.raises(SessionError) as ended:
        await manager.get(idle.id)
    assert ended.value.status == 410 and "idle for more than 60 s" in str(ended.value)
    with pytest.raises(SessionError) as unknown:
        await manager.get("sess_never")
    assert unknown.value.status == 404


async def test_by_default_implicit_sessions_end_after_a_day_and_explicit_ones_do_not(smol):
    manager = SessionManager(smol, 4096, {})
    explicit, implicit = await manager.create(), await manager.create(caller="someone")
    manager.sweep(now=time.time() + 86401)
    assert explicit.id in manager.sessions and implicit.id not in manager.sessions
    with pytest.raises(SessionError, match="86400 s"):
        await manager.get(implicit.id)


async def test_the_cap_ends_the_least_recently_used(smol):
    manager = SessionManager(smol, 4096, {}, max_sessions=3)
    first, second, third = [await manager.create() for _ in range(3)]
    await manager.get(first.id)  # used: now the most recent
    fourth = await manager.create()
    assert set(manager.sessions) == {first.id, third.id, fourth.id}
    with pytest.raises(SessionError, match="--arc-max-sessions 3"):
        await manager.get(second.id)


async def test_a_durable_session_is_unloaded_and_reloaded_exactly(smol, tmp_path):
    manager = SessionManager(smol, 4096, {"context_window": 2048}, storage_for(str(tmp_path)), ttl_s=60, max_sessions=2)
    session = await manager.create({"context_window": 2048, "max_tokens": 256})
    session.take_in(conversation(12), None)
    await session.commit()
    before = session.context.render()
    bodies = {id: session.store.get(id).content for id in session.store.ids()}
    assert before.compacted
    manager.sweep(now=time.time() + 61)
    assert session.id not in manager.sessions and manager.num_unloaded == 1
    again = await manager.get(session.id)  # reloaded from its folder
    assert again is not session and manager.num_unloaded == 0
    assert again.context.render().messages == before.messages
    assert {id: again.store.get(id).content for id in again.store.ids()} == bodies
    # The cap unloads too, and the next request brings the session back.
    others = [await manager.create() for _ in range(2)]
    assert session.id not in manager.sessions and (await manager.get(session.id)).id == session.id
    assert len(manager.sessions) == 2 and others


async def test_implicit_sessions_are_found_by_conversation_and_forgotten_when_they_end(smol):
    manager = SessionManager(smol, 4096, {}, ttl_s=60)
    messages = conversation(2)
    routed = await route(manager, messages, "caller-a")
    session = await manager.get(routed.id)
    session.take_in(messages, None)
    await manager.remember(session, routed)
    longer = messages + [{"role": "user", "content": "and the next?"}]
    assert (await route(manager, longer, "caller-a")).id == routed.id
    assert (await route(manager, longer, "caller-b")).id != routed.id
    manager.sweep(now=time.time() + 61)
    assert (await route(manager, longer, "caller-a")).id not in (routed.id, None)  # a new one


async def route(manager, messages, caller, client_id=None):
    return await manager.for_conversation(messages, caller, client_id)


def test_bad_limits_are_refused():
    with pytest.raises(ValueError, match="--arc-session-ttl"):
        SessionManager(None, 4096, {}, ttl_s=0)
    with pytest.raises(ValueError, match="--arc-max-sessions"):
        SessionManager(None, 4096, {}, max_sessions=0)


async def test_requests_are_recorded_and_survive_an_unload(smol, tmp_path):
    from arc_vllm.serving.step.chat import complete
    from arc_vllm.serving.step.engine import ChatEngine
    from tests.helpers.fake_engine import FakeEngine

    manager = SessionManager(smol, 4096, {}, storage_for(str(tmp_path)), ttl_s=60)
    session = await manager.create({"context_window": 2048, "max_tokens": 256})
    messages = conversation(4)
    for count in (4, 8, 16):
        messages = conversation(count)
        await complete({"messages": messages}, session, ChatEngine(FakeEngine(0)))
    records = list(session.records)
    assert len(records) == 3 and [r["engine_calls"] for r in records] == [1, 1, 1]
    assert records[0]["conversation_tokens"] < records[-1]["conversation_tokens"]
    assert all(r["view_tokens"] <= r["budget_tokens"] for r in records)
    assert records[-1]["compactions"] >= 1 and records[-1]["prefix_cached_tokens"] == 64
    assert set(records[0]) >= {"time", "conversation_tokens", "view_tokens", "budget_tokens",
                               "prefix_cached_tokens", "compactions", "recalls", "commands_served",
                               "engine_calls", "arc_ms", "engine_ms"}
    listed = {row["id"]: row for row in await manager.listing()}
    assert listed[session.id]["in_memory"] and listed[session.id]["requests"] == 3
    manager.sweep(now=time.time() + 61)
    listed = {row["id"]: row for row in await manager.listing()}
    assert not listed[session.id]["in_memory"] and listed[session.id]["observations"] == 16
    assert list((await manager.get(session.id)).records) == records  # kept with the session


async def test_records_are_bounded(smol):
    from arc_vllm.serving.sessions.session import MAX_RECORDS

    session = await SessionManager(smol, 4096, {}).create()
    for index in range(MAX_RECORDS + 5):
        session.records.append({"time": index})
    assert len(session.records) == MAX_RECORDS and session.records[0]["time"] == 5


async def test_the_conversation_index_is_bounded_also_for_durable_sessions(smol, tmp_path):
    """A durable implicit session stays indexed when it is unloaded (its conversation reloads
    it), so the index is bounded by count: the least recently used conversation is forgotten,
    its session still there by id."""
    from arc_vllm.serving.sessions.conversation_index import ConversationIndex

    manager = SessionManager(smol, 4096, {}, storage_for(str(tmp_path)), max_sessions=2)
    manager.storage.index = ConversationIndex(max_sessions=3)
    ids = []
    for index in range(6):
        messages = [{"role": "user", "content": f"conversation {index}"}]
        routed = await route(manager, messages, "caller")
        async with manager.using(routed.id) as session:  # as a request: committed when it ends
            session.take_in(messages, None)
        await manager.remember(await manager.get(routed.id), routed)
        ids.append(routed.id)
    assert len(manager.storage.index) == 3 and len(manager.sessions) <= 2
    assert (await route(manager, [{"role": "user", "content": "conversation 5"}], "caller")).id == ids[5]
    assert (await route(manager, [{"role": "user", "content": "conversation 0"}], "caller")).id not in ids
    assert (await manager.get(ids[0])).num_requests == 1  # forgotten by its conversation, not by its id


async def test_store_retention_removes_unused_sessions_from_disk_and_they_answer_410(smol, tmp_path):
    import os

    manager = SessionManager(smol, 4096, {}, storage_for(str(tmp_path)), store_retention_s=100)
    old, recent = await manager.create(), await manager.create()
    old.take_in([{"role": "user", "content": "task"}, {"role": "assistant", "content": "ls"},
                 {"role": "user", "content": "a.py\n" * 500}], None)
    await old.commit()
    stale = time.time() - 101
    os.utime(tmp_path / old.id / "session.json", (stale, stale))
    await manager.sweep_stored(now=time.time() + 60)  # a retention pass is due (every 60 s at most)
    assert not (tmp_path / old.id).exists() and (tmp_path / recent.id).exists()
    assert manager.store_bytes > 0 and old.id not in {row["id"] for row in await manager.listing()}
    with pytest.raises(SessionError) as removed:
        await manager.get(old.id)
    assert removed.value.status == 410 and "--arc-store-retention" in str(removed.value)
    with pytest.raises(ValueError, match="--arc-store-retention"):
        SessionManager(smol, 4096, {}, storage_for(None), store_retention_s=100)


@pytest.mark.parametrize("durable", [False, True])
async def test_a_session_id_is_checked_before_it_touches_the_disk(smol, tmp_path, durable):
    manager = SessionManager(smol, 4096, {}, storage_for(str(tmp_path) if durable else None))
    real = await manager.create()
    (tmp_path / "sess_elsewhere").mkdir()
    (tmp_path / "sess_elsewhere" / "session.json").write_text("{}")  # not an id ARC gives
    for bad in ("sess_" + "a" * 5000, "../" + real.id, "%2e%2e%2f", real.id + "/../" + real.id, "sess_elsewhere",
                real.id.upper(), "sess_\x00", 7, None):
        with pytest.raises(SessionError) as refused:
            await manager.get(bad)
        assert refused.value.status == 404 and len(str(refused.value)) < 300
        if durable:
            assert manager.storage.place(bad) is None  # no path is ever made of it
    assert await manager.get(real.id) is real


async def test_a_session_reloads_from_its_state_by_name_with_every_field_back(smol, tmp_path):
    """``Session.from_state`` reads ``session.json`` by name: a session with every field set
    (owner, client id, rebases, handoffs, records, last answer, a compacted context) written and
    read back writes the same state again, and a state written before a field existed (the key
    missing) loads with that field's default."""
    import json

    from arc_vllm.serving.sessions.session import Session

    manager = SessionManager(smol, 4096, {"context_window": 2048}, storage_for(str(tmp_path)))
    session = await manager.create({"context_window": 2048, "max_tokens": 256}, caller="scope", client_id="cli-1")
    session.tenant, session.user, session.num_handoffs, session.handoff_tokens = "t", "u", 2, 300
    session.last_answer = {"role": "assistant", "content": "done"}
    session.records.append({"time": 1.0, "view_tokens": 10, "api": "messages"})
    session.take_in(conversation(12), None)
    session.rebase()
    session.take_in(conversation(3), None)
    state = json.loads(json.dumps(session.state()))
    session.close()
    again = Session.from_state(state, smol, session.storage)
    assert json.loads(json.dumps(again.state())) == state
    assert (again.tenant, again.user, again.client_id, again.num_rebases, again.num_handoffs) == ("t", "u", "cli-1", 1, 2)
    older = {key: value for key, value in state.items() if key not in ("user", "num_handoffs", "handoff_tokens")}
    again.close()
    aged = Session.from_state(older, smol, session.storage)
    assert (aged.user, aged.num_handoffs, aged.handoff_tokens) == (None, 0, 0) and aged.records
    aged.close()


async def test_a_session_stored_by_the_code_before_its_state_was_declared_once_loads(smol, tmp_path):
    """``tests/fixtures/stored_sessions/sess_865089139700093d90eccf86`` (written at e99697a):
    loaded through the folder storage, every field is back by name, the view is the one it
    rendered then, and the session goes on."""
    import json
    import shutil
    from pathlib import Path

    fixture = Path(__file__).parent / "fixtures" / "stored_sessions" / "sess_865089139700093d90eccf86"
    shutil.copytree(fixture, tmp_path / fixture.name)
    expected = json.loads((fixture / "expected_view.json").read_text())
    manager = SessionManager(smol, 4096, {}, storage_for(str(tmp_path)))
    session = await manager.get(fixture.name)
    assert (session.caller, session.client_id, session.tenant, session.user) == (
        "scope-" + "c" * 34, "thread-1", "tenant-a", "user-1")
    assert session.last_answer == {"role": "assistant", "content": "done"} and len(session.records) == 10
    assert session.context.native and session.context.num_compactions > 0
    # The view rendered then, but for its catalog page: since 2026-12-05 the page's line comes
    # after its stubs (a page that gains a stub keeps its text up to it: the prefix cache).
    shown = session.context.current_view().messages
    assert len(shown) == len(expected["messages"])
    for now, then in zip(shown, expected["messages"]):
        if isinstance(then.get("content"), str) and formats.CATALOG_PAGE_MARK in then["content"]:
            lines = then["content"].split("\n")
            page = next(line for line in lines if line.startswith(formats.CATALOG_PAGE_MARK))
            assert now["content"] == "\n".join([line for line in lines if line != page] + [page])
        else:
            assert now == then
    assert abs(session.context.render().tokens - expected["tokens"]) <= 2
    session.context.observe("cat(next)", "more\n" * 50)
    assert session.context.render().tokens <= session.config.input_budget_tokens
    session.save()
    await session.commit()
    saved = json.loads((tmp_path / fixture.name / "session.json").read_text())
    assert saved["num_requests"] == session.num_requests and saved["last_used"] == session.last_used


async def test_a_slow_listing_does_not_hold_up_another_sessions_request(smol, tmp_path, monkeypatch):
    """FolderStorage does its file work off the event loop: a listing stuck reading the folder
    (held here until the request is done) does not stop another session's request from being
    served and committed meanwhile."""
    import asyncio
    import threading

    from arc_vllm.serving.sessions.folder import FolderStorage

    storage = storage_for(str(tmp_path))
    assert isinstance(storage, FolderStorage)
    manager = SessionManager(smol, 4096, {}, storage)
    listed, served = await manager.create(), await manager.create()
    manager.sessions.pop(listed.id)  # stored only: the listing reads it from the folder
    gate, original = threading.Event(), FolderStorage.summaries

    def slow(self):  # a folder of many sessions: the listing takes as long as the gate says
        assert threading.current_thread() is not threading.main_thread()
        gate.wait(30)
        return original(self)

    monkeypatch.setattr(FolderStorage, "summaries", slow)
    listing = asyncio.ensure_future(manager.listing())
    await asyncio.sleep(0.05)
    before = (tmp_path / served.id / "session.json").read_text()
    async with manager.using(served.id, write=True) as session:
        session.take_in(conversation(3), None)
    after = (tmp_path / served.id / "session.json").read_text()
    assert after != before and json.loads(after) == session.state()  # committed...
    assert not listing.done()  # ...while the listing still waits
    gate.set()
    assert listed.id in {row["id"] for row in await listing}
