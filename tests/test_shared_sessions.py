"""Sessions shared by several processes over one ``--arc-store-dir`` (vLLM's
``--api-server-count N``, engine replicas): one request of a session at a time whichever
process serves it, any process takes a session over with its full state, nothing acknowledged
is lost. First two session managers in one process (each lock and store file is opened per
manager, as two processes would), then two real servers.

    pytest tests/test_shared_sessions.py
"""

import asyncio
import json
import threading

import pytest
from openai import OpenAI

from arc_vllm.model_prep import prepare_tiny
from arc_vllm.serving.local import Server
from arc_vllm.serving.sessions.places import storage_for
from arc_vllm.serving.sessions.manager import SessionManager
from tests.helpers.agent_steps import burst
from tests.helpers.api_calls import call, log


def turn(index: int) -> list[dict]:
    return [{"role": "assistant", "content": f"step {index}: reading"},
            {"role": "user", "content": f"observation {index}\n" + f"line {index}\n" * (20 + index)}]


def test_shared_sessions_need_a_store_folder(smol):
    with pytest.raises(ValueError, match="--arc-store"):
        SessionManager(smol, 4096, {}, storage_for(None, shared=True))


def test_two_managers_take_a_session_over_in_turn_and_never_at_once(smol, tmp_path):
    first = SessionManager(smol, 4096, {}, storage_for(str(tmp_path), shared=True, lock_timeout_s=5))
    second = SessionManager(smol, 4096, {}, storage_for(str(tmp_path), shared=True, lock_timeout_s=5))
    session_id = asyncio.run(first.create()).id
    messages = [{"role": "system", "content": "Agent."}, {"role": "user", "content": "Find it."}]
    views = []

    async def step(manager, index):
        messages.extend(turn(index))
        async with manager.using(session_id) as session:
            session.take_in(messages, None)
            views.append(session.context.render().messages)
            session.save()

    async def scenario():
        for index in range(6):  # alternate: each manager picks up what the other wrote
            await step(first if index % 2 == 0 else second, index)
        order = []

        async def hold(manager, name):
            async with manager.using(session_id):
                order.append(f"{name} in")
                await asyncio.sleep(0.3)
                order.append(f"{name} out")

        await asyncio.gather(hold(first, "a"), hold(second, "b"))
        return order

    order = asyncio.run(scenario())
    # Every view extends the one before: the state travelled with the session.
    for earlier, later in zip(views, views[1:]):
        assert later[:len(earlier)] == earlier
    assert order in (["a in", "a out", "b in", "b out"], ["b in", "b out", "a in", "a out"])
    reopened = SessionManager(smol, 4096, {}, storage_for(str(tmp_path)))  # one owner again, e.g. a restart
    session = asyncio.run(reopened.get(session_id))
    assert session.num_requests == 6 and len(session.store) == 6
    assert session.context.render().messages == views[-1]


@pytest.mark.slow
@pytest.mark.memory(6)  # two servers of its own
def test_two_servers_serve_one_session_with_its_full_state(tmp_path):
    store = tmp_path / "sessions"
    model = str(prepare_tiny())
    servers = [Server(model, tmp_path / f"server{i}.log", "--arc-store-dir", str(store),
                      "--arc-shared-sessions") for i in range(2)]
    try:
        for server in servers:
            server.wait()
        clients = [OpenAI(base_url=server.base + "/v1", api_key="none", max_retries=0) for server in servers]
        name = clients[0].models.list().data[0].id
        session = clients[0].post("/arc/sessions", body={}, cast_to=object)
        messages = [{"role": "system", "content": "Agent."}, {"role": "user", "content": "Find it."}]
        views = []
        for index in range(6):
            messages += turn(index)
            reply = clients[index % 2].chat.completions.create(
                model=name, messages=messages, max_tokens=2,
                extra_body={"vllm_xargs": {"arc_session": session["id"], "arc_debug": True}})
            arc = reply.model_extra["arc"]
            assert arc["observations"] == index + 1
            views.append(arc["views"][0])
        for earlier, later in zip(views, views[1:]):
            assert later[:len(earlier)] == earlier
        # The same new turn sent to both servers at once: served one after the other, stored once.
        messages += turn(6)
        answers = []

        def send(client):
            answers.append(client.chat.completions.create(
                model=name, messages=messages, max_tokens=2,
                extra_body={"vllm_xargs": {"arc_session": session["id"]}}).model_extra["arc"])

        threads = [threading.Thread(target=send, args=(client,)) for client in clients]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(answer["observations"] for answer in answers) == [7, 7]
        described = clients[1].get(f"/arc/sessions/{session['id']}", cast_to=object)
        assert described["requests"] == 8 and described["observations"] == 7
        # 20 requests of one implicit conversation at once (Codex's prompt_cache_key), half to
        # each server and half of them streamed, each with one more observation: one session,
        # every observation once.
        observations = [log(index, lines=4) for index in range(20)]
        assert burst([server.base for server in servers], "responses", "burst-1", observations, name) == [200] * 20
        listed = call(servers[0].base, "GET", "/v1/arc/sessions")[1]["sessions"]
        bursts = [row for row in listed if row.get("client_id") == "burst-1"]
        assert len(bursts) == 1 and bursts[0]["observations"] == 20
    finally:
        for server in servers:
            server.stop()
    state = json.loads((store / session["id"] / "session.json").read_text())
    assert state["num_requests"] == 8


def test_processes_sharing_a_store_route_one_conversation_to_one_session(smol, tmp_path):
    """Implicit routing is atomic across processes over one store folder: 20 requests of one
    conversation sent at once to two managers (two API processes), each in its own thread and
    event loop, all reach one session; after they end, the conversation's next step finds it
    from either process, and another caller's does not."""
    managers = [SessionManager(smol, 4096, {}, storage_for(str(tmp_path), shared=True, lock_timeout_s=30)) for _ in range(2)]
    messages = [{"role": "user", "content": "Fix the build."}]
    routed = []

    def send(manager):
        async def one():
            held = await manager.for_conversation(messages, "caller")
            routed.append(held)
            await asyncio.sleep(0.05)  # still in flight while the others route
            async with manager.using(held.id) as session:
                session.take_in(messages, None)
                await manager.remember(session, held)

        asyncio.run(one())

    threads = [threading.Thread(target=send, args=(managers[index % 2],)) for index in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len({held.id for held in routed}) == 1
    later = messages + [{"role": "assistant", "content": "ls"}, {"role": "user", "content": "a.py"}]
    for manager in managers:
        assert asyncio.run(manager.for_conversation(later, "caller")).id == routed[0].id
        assert asyncio.run(manager.for_conversation(later, "another caller")).id != routed[0].id
