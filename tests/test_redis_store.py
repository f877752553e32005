"""The Redis session store (``serving/sessions/redis_store.py``) against a real redis-server,
through the session manager as a server uses it: two managers on one Redis are two replicas
(each its own connections, leases and copies). One session per conversation across them, each
observation stored once and exact by id on both, a stale holder refused, a store that does not
answer a 503 with nothing stored, a restarted Redis continuing, retention as expiry, the
per-session cap, per-caller listings, ``store copy`` both ways, and the folder store and the
Redis store giving identical views for random conversations (hypothesis). The served path,
two ``arc-vllm serve`` replicas, is ``tests/test_redis_replicas.py``.

    pytest tests/test_redis_store.py
"""

import asyncio
import json
import threading
import time

import pytest
from hypothesis import given, settings, strategies as st

from arc_vllm.serving.errors import LeaseLost, SessionError, StoreUnavailable
from arc_vllm.serving.sessions.manager import SessionManager
from arc_vllm.serving.sessions.ownership import Who
from arc_vllm.serving.sessions.places import storage_for
from arc_vllm.serving.sessions.redis_store import RedisStorage
from arc_vllm.serving.sessions.store_copy import copy_sessions
from tests.helpers.histories import make_text
from arc_vllm.serving.local import RedisServer

pytestmark = pytest.mark.anyio


def tool_turns(start: int, count: int, lines: int = 40) -> list[dict]:
    messages = []
    for index in range(start, start + count):
        messages += [{"role": "assistant", "content": "", "tool_calls": [
            {"id": f"c{index}", "type": "function", "function": {"name": "cat", "arguments": json.dumps({"n": index})}}]},
            {"role": "tool", "tool_call_id": f"c{index}", "content": f"log {index} line\n" * (lines + index)}]
    return messages


TASK = [{"role": "system", "content": "You are an agent."}, {"role": "user", "content": "Find the failing test."}]
TOOLS = [{"type": "function", "function": {"name": "cat", "parameters": {"type": "object"}}}]


def replica(smol, url: str, **options) -> SessionManager:
    """One replica's session manager on the Redis at ``url``."""
    return SessionManager(smol, 4096, {"context_window": 2048, "max_tokens": 256},
                          storage_for(url, lease_s=options.pop("lease_s", 2.0), timeout_s=options.pop("timeout_s", 2.0),
                                      lock_timeout_s=options.pop("lock_timeout_s", 20.0), **options))


async def request(manager, id: str, messages: list[dict], tools=None) -> list[dict]:
    """One request of session ``id``: its messages taken in, the view rendered, committed."""
    async with manager.using(id, write=True) as session:
        session.take_in(messages, tools)
        view = session.context.render().messages
        session.save()
    return view


async def test_two_replicas_take_turns_on_one_session_with_its_whole_state(smol, redis_url):
    first, second = replica(smol, redis_url), replica(smol, redis_url)
    session = await first.create()
    messages, views = list(TASK), []
    for step in range(8):  # alternate: each replica picks up what the other committed
        messages += tool_turns(step, 1)
        views.append(await request((first, second)[step % 2], session.id, messages, TOOLS))
    for earlier, later in zip(views, views[1:]):
        assert later[:2] == earlier[:2]  # F kept, the view carried over
    # A third replica (a node that never saw it) loads the same session: the same view, and each
    # observation exact by id.
    third = replica(smol, redis_url)
    async with third.using(session.id) as loaded:
        assert loaded.context.current_view().messages == views[-1]
        assert loaded.num_requests == 8 and len(loaded.store) == 8
        for index, id in enumerate(loaded.store.ids()):
            assert loaded.store.get(id).content == f"log {index} line\n" * (40 + index)
        assert loaded.store.history() == [f"log {index} line\n" * (40 + index) for index in range(8)]
    # Each replica lists the session as stored, not as its own copy left it (the first
    # replica's copy is one request behind; found as a listing one observation short).
    for manager in (first, second, third):
        row, = [row for row in await manager.listing() if row["id"] == session.id]
        assert row["observations"] == 8 and row["requests"] == 8, row


async def test_a_request_writes_what_it_added_not_what_the_session_holds(smol, redis_url):
    """Per request the commit appends the new observation frames and the growing parts' new
    items; the rest is bounded by the budgets. Measured in what Redis holds after each request:
    its log grows by the new frames only and the rest stays bounded."""
    manager = replica(smol, redis_url)
    storage: RedisStorage = manager.storage
    session = await manager.create()
    messages, sizes = list(TASK), []
    for step in range(60):
        messages += tool_turns(step, 1, lines=5)
        await request(manager, session.id, messages, TOOLS)
        meta = await storage.client.hgetall(storage.key(session.id, "meta"))
        sizes.append((await storage.client.llen(storage.key(session.id, "log")),
                      await storage.client.llen(storage.key(session.id, "turns")), len(meta[b"rest"])))
    assert [log for log, _, _ in sizes] == list(range(1, 61)) == [turns for _, turns, _ in sizes]
    assert max(rest for _, _, rest in sizes[30:]) < 2.5 * min(rest for _, _, rest in sizes[30:])
    # The writer's own account: one more step appends one turn, one fingerprint pair, one frame.
    async with manager.using(session.id) as held:
        held.take_in(messages + tool_turns(60, 1, lines=5), TOOLS)
        changes = {change.name: change for change in storage.written[held].changes(held)}
        assert not any(change.reset for change in changes.values())
        assert len(changes["turns"].items) == 1 and len(changes["fingerprints"].items) == 2
        assert len(held.store.log.pending) == 1


def test_one_conversation_is_one_session_across_replicas_under_concurrency(smol, redis_url):
    """20 requests of one implicit conversation at once (under the client's own id, Codex's
    thread say: its steps of 1 to 4 observations, in any order), alternately on two replicas
    (each its own event loop in its own thread, as two processes): one session, every
    observation once."""
    loops = [asyncio.new_event_loop() for _ in range(2)]
    threads = [threading.Thread(target=loop.run_forever, daemon=True) for loop in loops]
    for thread in threads:
        thread.start()
    managers = [replica(smol, redis_url) for _ in range(2)]

    async def send(manager, index):
        messages = TASK + tool_turns(0, 1 + index % 4)
        held = await manager.for_conversation(messages, "caller", "thread-1")
        session = None
        try:
            async with manager.using(held.id, write=True) as session:
                session.take_in(messages, TOOLS)
                session.save()
        finally:
            await manager.remember(session, held)
        return held.id

    try:
        futures = [asyncio.run_coroutine_threadsafe(send(managers[index % 2], index), loops[index % 2])
                   for index in range(20)]
        routed = [future.result(timeout=120) for future in futures]
        for manager, loop in zip(managers, loops):
            asyncio.run_coroutine_threadsafe(manager.storage.close(), loop).result(timeout=10)
    finally:
        for loop in loops:
            loop.call_soon_threadsafe(loop.stop)
    assert len(set(routed)) == 1
    check = replica(smol, redis_url)

    async def verify():
        async with check.using(routed[0]) as session:
            assert len(session.store) == 4 and len(session.store.occurrences) == 4
        later = TASK + tool_turns(0, 5)
        assert (await check.for_conversation(later, "caller", "thread-1")).id == routed[0]
        assert (await check.for_conversation(later, "another caller", "thread-1")).id != routed[0]

    asyncio.run(verify())


async def test_a_stale_holder_is_refused_and_the_lease_frees_the_session(smol, redis_url):
    """A replica that stopped renewing (killed) holds its sessions until the lease expires;
    then another serves them, and the first one's late commit is refused (its fencing token is
    no longer the lease's) with nothing written."""
    first, second = replica(smol, redis_url, lease_s=1.0), replica(smol, redis_url, lease_s=1.0)
    session = await first.create()
    await request(first, session.id, TASK + tool_turns(0, 1), TOOLS)
    storage: RedisStorage = first.storage
    token, _ = await storage.take(session.id)  # held, then never renewed: as a replica killed
    started = time.monotonic()
    await request(second, session.id, TASK + tool_turns(0, 2), TOOLS)
    waited = time.monotonic() - started
    assert 0.5 < waited < 5, waited
    held = first.sessions[session.id]
    held.take_in(TASK + tool_turns(0, 3), TOOLS)
    held.save()
    storage.tokens[session.id] = token  # the killed replica's late write
    with pytest.raises(LeaseLost) as refused:
        await held.commit()
    assert refused.value.status == 409
    async with second.using(session.id) as now:
        assert len(now.store) == 2 and now.num_requests == 2  # nothing of the stale write


async def test_an_unreachable_store_is_a_503_then_the_request_succeeds_stored_once(smol, tmp_path):
    server = RedisServer(tmp_path / "redis").start()
    try:
        manager = replica(smol, server.url(), timeout_s=1.0)
        session = await manager.create()
        await request(manager, session.id, TASK + tool_turns(0, 1), TOOLS)
        server.stop()
        started = time.monotonic()
        with pytest.raises(StoreUnavailable) as down:
            await request(manager, session.id, TASK + tool_turns(0, 2), TOOLS)
        assert down.value.status == 503 and server.url() in str(down.value) and "nothing" in str(down.value)
        assert time.monotonic() - started < 10
        server.start()  # its append-only file read back: every acknowledged write
        view = await request(manager, session.id, TASK + tool_turns(0, 2), TOOLS)
        other = replica(smol, server.url())
        async with other.using(session.id) as loaded:
            assert len(loaded.store) == 2 and len(loaded.store.occurrences) == 2  # stored once
            assert loaded.context.current_view().messages == view
        # Restarted mid-run: the sessions continue where they were.
        server.stop()
        server.start()
        await request(manager, session.id, TASK + tool_turns(0, 3), TOOLS)
        async with other.using(session.id) as loaded:
            assert len(loaded.store) == 3 and loaded.num_requests == 3
    finally:
        server.stop()


async def test_a_commit_that_fails_midway_leaves_nothing_and_the_copy_is_reloaded(smol, redis_url):
    """The commit is one script: refused (here by the per-session cap, a 413), nothing of the
    request is stored, and the replica's copy, which had taken the request in, is reloaded."""
    manager = replica(smol, redis_url, max_session_bytes=20_000)
    session = await manager.create()
    await request(manager, session.id, TASK + tool_turns(0, 1), TOOLS)
    with pytest.raises(SessionError) as capped:
        await request(manager, session.id, TASK + tool_turns(0, 1) + [
            {"role": "assistant", "content": "", "tool_calls": [{"id": "big", "type": "function",
                                                                 "function": {"name": "cat", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "big", "content": "x" * 50_000}], TOOLS)
    assert capped.value.status == 413 and "--arc-store-max-session-bytes" in str(capped.value)
    async with manager.using(session.id) as again:
        assert again is not session and len(again.store) == 1 and again.num_requests == 1


async def test_retention_is_expiry_and_a_removed_session_answers_410(smol, redis_url):
    manager = SessionManager(smol, 4096, {}, storage_for(redis_url, retention_s=1.0), store_retention_s=1.0)
    session = await manager.create()
    await request(manager, session.id, TASK + tool_turns(0, 1), TOOLS)
    storage: RedisStorage = manager.storage
    assert 0 < await storage.client.pttl(storage.key(session.id, "log")) <= 1000
    await asyncio.sleep(1.3)
    other = SessionManager(smol, 4096, {}, storage_for(redis_url, retention_s=1.0), store_retention_s=1.0)
    with pytest.raises(SessionError) as gone:
        async with other.using(session.id):
            pass
    assert gone.value.status == 410 and "retention" in str(gone.value)
    await other.sweep_stored(now=time.time() + 60)  # the listings tidied
    assert await storage.client.zscore("arc:sessions", session.id) is None
    assert not [key for key in await storage.client.keys(f"arc:s:{session.id}:*")]


async def test_each_caller_lists_its_own_sessions_from_its_index(smol, redis_url):
    manager = replica(smol, redis_url)
    alice, bob = Who("c1", "tenant-a", "alice"), Who("c2", "tenant-b")
    mine = await manager.create(who=alice)
    theirs = await manager.create(who=bob)
    for session, who in ((mine, alice), (theirs, bob)):
        await request(manager, session.id, TASK + tool_turns(0, 1), TOOLS)
    other = replica(smol, redis_url)  # nothing in its memory: every row from Redis
    assert [row["id"] for row in await other.listing(alice)] == [mine.id]
    assert [row["id"] for row in await other.listing(Who("c3", "tenant-a"))] == [mine.id]  # the key reads its users'
    assert [row["id"] for row in await other.listing(bob)] == [theirs.id]
    assert {row["id"] for row in await other.listing(Who("ops", "ops", admin=True))} == {mine.id, theirs.id}
    with pytest.raises(SessionError) as hidden:
        async with other.using(theirs.id, alice, write=True):
            pass
    assert hidden.value.status == 404


async def test_store_copy_moves_sessions_both_ways_with_identical_views(smol, redis_url, tmp_path):
    folder = SessionManager(smol, 4096, {"context_window": 2048, "max_tokens": 256}, storage_for(str(tmp_path / "a")))
    for count in (2, 6, 12):  # an implicit session (Codex's thread "cli"), found by its conversation
        routed = await folder.for_conversation(TASK + tool_turns(0, count), "caller", "cli")
        await request(folder, routed.id, TASK + tool_turns(0, count), TOOLS)
        await folder.remember(folder.sessions[routed.id], routed)
    session = folder.sessions[routed.id]
    original = await folder.get(session.id)
    view, history = original.context.current_view().messages, original.store.history()
    await folder.close()  # as a stopped server: its store files are let go
    assert await copy_sessions(str(tmp_path / "a"), redis_url) == [session.id]
    assert await copy_sessions(redis_url, str(tmp_path / "b")) == [session.id]
    following = []
    for store in (redis_url, str(tmp_path / "b")):
        manager = await SessionManager(smol, 4096, {}, storage_for(store)).start()
        async with manager.using(session.id) as copied:
            assert copied.context.current_view().messages == view
            assert copied.store.history() == history
            assert (copied.caller, copied.client_id, copied.num_requests) == (session.caller, "cli", 3)
        following.append(await request(manager, session.id, TASK + tool_turns(0, 13), TOOLS))
        # Found by its conversation in the copy too (an implicit session).
        assert (await manager.for_conversation(TASK + tool_turns(0, 13), "caller", "cli")).id == session.id
    # ...and each copy goes on as the original does.
    folder = SessionManager(smol, 4096, {}, storage_for(str(tmp_path / "a")))
    assert following == [await request(folder, session.id, TASK + tool_turns(0, 13), TOOLS)] * 2
    await folder.close()
    with pytest.raises(ValueError, match="already holds"):
        await copy_sessions(str(tmp_path / "a"), redis_url)


conversations = st.lists(st.tuples(st.sampled_from(["tool", "text", "human"]), st.integers(0, 6_000),
                                   st.integers(0, 2 ** 16), st.booleans()), min_size=1, max_size=24)


@settings(max_examples=12)
@given(steps=conversations, reload_every=st.integers(1, 5))
def test_the_folder_and_the_redis_store_give_identical_views(smol, redis_server, tmp_path_factory, steps, reload_every):
    """Random conversations (tool calls, text turns, the user's own words; bodies up to 6k
    characters of any text), sent request by request to a folder store and to a Redis store,
    each session reloaded from its store every few requests (another replica): the same view at
    every request, and the same observations."""
    redis_server.command("-n", "15", "FLUSHDB")
    folder = tmp_path_factory.mktemp("folder")

    async def run():
        stores = [str(folder), redis_server.url(15)]

        def replica_of(store):  # the folder shared as replicas share it: each request holds its files
            return SessionManager(smol, 4096, {}, storage_for(store, shared=True))

        managers = [replica_of(store) for store in stores]
        ids = [(await manager.create({"context_window": 2048, "max_tokens": 256})).id for manager in managers]
        messages = list(TASK)
        for index, (kind, length, seed, request_ends) in enumerate(steps):
            body = make_text(seed, length)
            if kind == "tool":
                messages += tool_turns(index, 1)[:1] + [{"role": "tool", "tool_call_id": f"c{index}", "content": body}]
            elif kind == "text":
                messages += [{"role": "assistant", "content": f"step {index}"}, {"role": "user", "content": body}]
            else:
                messages += [{"role": "assistant", "content": "Done."}, {"role": "user", "content": body[:400] or "go on"}]
            if not request_ends and index < len(steps) - 1:
                continue
            views = []
            for position, manager in enumerate(managers):
                if index % reload_every == 0:  # as another replica: loaded from the store
                    await manager.close()
                    managers[position] = manager = replica_of(stores[position])
                try:
                    views.append(await request(manager, ids[position], messages, TOOLS))
                except (SessionError, ValueError) as error:  # a message that cannot fit: refused alike by both
                    views.append(("refused", str(error).replace(ids[position], "ID")))
            assert views[0] == views[1]
        histories = []
        for manager, id in zip(managers, ids):
            async with manager.using(id) as session:
                histories.append(session.store.history())
            await manager.storage.close()
        assert histories[0] == histories[1]

    asyncio.run(run())
