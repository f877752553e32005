"""Two ``arc-vllm serve`` replicas over one Redis (``--arc-store redis://...``) and no shared
folder, as two nodes behind any balancer: requests of one conversation alternated between
them on the three APIs, streamed and not, are one session with every observation stored once
and exact by id on both; a compaction handle issued by one continues on the other; 20
concurrent requests of one conversation across both are one session; another key's session is
a 404 on both; Redis restarted mid-run, the sessions go on; Redis down, a 503 that names it,
then the same request succeeds, stored once; a replica killed mid-request frees its session
within its lease, and the other continues it with nothing duplicated. A real redis-server.

    pytest tests/test_redis_replicas.py
"""

import json
import time

import pytest

from arc_vllm.model_prep import prepare_tiny
from arc_vllm.serving.local import Server
from tests.helpers.agent_steps import APIS, burst, drop_after, signature, step
from tests.helpers.api_calls import call, log
from tests.helpers.conversations import visible_id
from arc_vllm.serving.local import RedisServer

pytestmark = [pytest.mark.slow, pytest.mark.memory(6)]  # two replicas of its own
KEY_A, KEY_B = {"Authorization": "Bearer key-a"}, {"Authorization": "Bearer key-b"}
LEASE_S = 3         # replica 0's: the one killed mid-request
LONG_LEASE_S = 600  # replica 1's: one a dead request could hold past any wait for it


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A redis-server of this module's own (it is restarted and stopped here) and two replicas."""
    folder = tmp_path_factory.mktemp("replicas")
    redis = RedisServer(folder / "redis").start()
    model = str(prepare_tiny())
    replicas = [Server(model, folder / f"replica{index}.log", "--arc-store", redis.url(), "--api-key", "key-a",
                       "key-b", "--arc-store-lease", str(lease), "--arc-store-timeout", "2")
                for index, lease in enumerate((LEASE_S, LONG_LEASE_S))]
    try:
        for replica in replicas:
            replica.wait()
        yield redis, replicas, call(replicas[0].base, "GET", "/v1/models", headers=KEY_A)[1]["data"][0]["id"]
    finally:
        for replica in replicas:
            replica.stop()
        redis.stop()


def arc_of_stream(events: list[dict]) -> dict:
    for event in reversed(events):
        for holder in (event, event.get("response") or {}, event.get("message") or {}, event.get("delta") or {}):
            if isinstance(holder, dict) and "arc" in holder:
                return holder["arc"]
    raise AssertionError(f"no arc object in {events[-3:]}")


def served(replica, api, client_id, observations, model, stream=False, key=KEY_A):
    """One step, answered 200: its ``arc`` object."""
    path, body, headers = step(api, client_id, observations, model, stream=stream)
    status, answer, response_headers = call(replica.base, "POST", path, body, {**headers, **key})
    assert status == 200, (status, answer)
    if stream:
        events = [json.loads(line[6:]) for line in answer.splitlines() if line.startswith("data: {")]
        return arc_of_stream(events)
    return answer["arc"]


def stored_on(replica, sid: str, observations: list[str], key=KEY_A) -> int:
    """How many of ``observations`` the replica returns exactly by id."""
    return sum(call(replica.base, "GET", f"/v1/arc/sessions/{sid}/observations/{visible_id(signature(index), body)}",
                    headers=key)[1] == body for index, body in enumerate(observations))


@pytest.mark.parametrize("api", APIS)
def test_a_conversation_alternated_between_replicas_is_one_session_stored_once(cluster, api):
    _, replicas, model = cluster
    observations = [log(index, lines=30) for index in range(6)]
    sessions = set()
    for count in range(1, 7):  # each step to the other replica, every other one streamed
        arc = served(replicas[count % 2], api, None if api == "chat" else f"alt-{api}", observations[:count], model,
                     stream=count % 2 == 0)
        sessions.add(arc["session"])
        assert arc["observations"] == count
    [sid] = sessions
    for replica in replicas:
        assert stored_on(replica, sid, observations) == 6
        described = call(replica.base, "GET", f"/v1/arc/sessions/{sid}", headers=KEY_A)[1]
        assert described["requests"] == 6 and described["observations"] == 6 and described["occurrences"] == 6


def test_a_compaction_handle_from_one_replica_continues_on_the_other(cluster):
    _, replicas, model = cluster
    items = [{"role": "user", "content": "Read every log."}]
    for index in range(3):
        items += [{"type": "function_call", "call_id": f"c{index}", "name": "cat",
                   "arguments": json.dumps({"path": f"log{index}"})},
                  {"type": "function_call_output", "call_id": f"c{index}", "output": log(index, 30)}]
    status, compacted, _ = call(replicas[0].base, "POST", "/v1/responses/compact",
                                {"model": model, "input": items}, KEY_A)
    assert status == 200 and compacted["output"][-1]["type"] == "compaction"
    handle = compacted["output"][-1]["encrypted_content"]
    following = compacted["output"] + [
        {"type": "function_call", "call_id": "c3", "name": "cat", "arguments": json.dumps({"path": "log3"})},
        {"type": "function_call_output", "call_id": "c3", "output": log(3, 30)}]
    status, answer, _ = call(replicas[1].base, "POST", "/v1/responses",
                             {"model": model, "input": following, "max_output_tokens": 2, "store": False}, KEY_A)
    assert status == 200, answer
    sid = answer["arc"]["session"]
    assert sid == compacted["arc"]["session"] and answer["arc"]["observations"] == 4
    assert stored_on(replicas[0], sid, [log(index, 30) for index in range(4)]) == 4
    assert handle.startswith("arc1.")


def test_concurrent_requests_of_one_conversation_across_replicas_are_one_session(cluster):
    _, replicas, model = cluster
    observations = [log(index, lines=4) for index in range(20)]
    assert burst([replica.base for replica in replicas], "responses", "burst-r", observations, model, KEY_A) == [200] * 20
    for replica in replicas:
        listed = call(replica.base, "GET", "/v1/arc/sessions", headers=KEY_A)[1]["sessions"]
        bursts = [row for row in listed if row.get("client_id") == "burst-r"]
        assert len(bursts) == 1 and bursts[0]["observations"] == 20, bursts


@pytest.mark.parametrize("api", APIS)
def test_a_stream_its_client_drops_lets_the_session_go_with_its_step_committed(cluster, api):
    """A user pressing Esc mid-stream: the engine's request is aborted and the session let go
    at once, its step committed (recorded, unanswered). The stream is dropped on replica 1,
    whose lease outlasts the other replica's wait for it (60 s): a lease kept by the dead
    stream would make the next step a 409 instead of an answer."""
    _, replicas, model = cluster
    client_id, observations = f"dropped-redis-{api}", [log(index, 4) for index in range(3)]
    sid = served(replicas[1], api, client_id, observations[:1], model)["session"]
    path, body, headers = step(api, client_id, observations[:2], model, stream=True, max_tokens=48)
    assert drop_after(replicas[1].base, path, body, {**KEY_A, **headers}, events=4) == 4
    arc = served(replicas[0], api, client_id, observations, model)
    assert arc["session"] == sid and arc["observations"] == 3
    described = call(replicas[0].base, "GET", f"/v1/arc/sessions/{sid}", headers=KEY_A)[1]
    assert described["requests"] == 3, described  # the first, the dropped one, the next


def test_another_keys_session_is_unknown_on_every_replica(cluster):
    _, replicas, model = cluster
    arc = served(replicas[0], "chat", "keyed-a", [log(0, 10)], model)
    sid = arc["session"]
    for replica in replicas:
        assert call(replica.base, "GET", f"/v1/arc/sessions/{sid}", headers=KEY_B)[0] == 404
        path, body, headers = step("chat", None, [log(0, 10), log(1, 10)], model)
        status, _, _ = call(replica.base, "POST", path, body, {"X-ARC-Session": sid, **KEY_B})
        assert status == 404
        assert sid not in {row["id"] for row in call(replica.base, "GET", "/v1/arc/sessions", headers=KEY_B)[1]["sessions"]}
        assert call(replica.base, "GET", f"/v1/arc/sessions/{sid}", headers=KEY_A)[0] == 200


def test_redis_restarted_mid_run_then_down_then_back(cluster):
    """Restarted (its append-only file read back), the sessions go on; down, a request is a 503
    naming the store, within the timeout; back, the same request succeeds, stored once."""
    redis, replicas, model = cluster
    observations = [log(index, lines=20) for index in range(5)]
    sid = served(replicas[0], "messages", "restart", observations[:2], model)["session"]
    redis.stop()
    redis.start()
    assert served(replicas[1], "messages", "restart", observations[:3], model)["session"] == sid
    redis.stop()
    try:
        for replica, stream in ((replicas[0], False), (replicas[1], True)):
            path, body, headers = step("messages", "restart", observations[:4], model, stream=stream)
            started = time.monotonic()
            status, error, _ = call(replica.base, "POST", path, body, {**headers, **KEY_A})
            assert status == 503 and f"127.0.0.1:{redis.port}" in json.dumps(error), (status, error)
            assert time.monotonic() - started < 15
    finally:
        redis.start()
    arc = served(replicas[1], "messages", "restart", observations[:4], model)
    assert arc["session"] == sid and arc["observations"] == 4
    described = call(replicas[0].base, "GET", f"/v1/arc/sessions/{sid}", headers=KEY_A)[1]
    assert described["observations"] == 4 and described["occurrences"] == 4 and described["requests"] == 3
    assert stored_on(replicas[0], sid, observations[:4]) == 4


def test_a_replica_killed_mid_request_frees_its_session_within_the_lease(cluster):
    """Last in the module: it kills a replica. A streamed request holding the session on one
    replica; that replica killed (SIGKILL); the conversation's next step on the other waits at
    most the lease, and nothing of the killed request was stored, so nothing is duplicated."""
    _, replicas, model = cluster
    observations = [log(index, lines=20) for index in range(4)]
    sid = served(replicas[1], "chat", "killed", observations[:2], model)["session"]
    path, body, headers = step("chat", "killed", observations[:3], model, stream=True, max_tokens=3000)
    body["ignore_eos"] = True  # a long answer: the replica is still serving it when it is killed
    import http.client

    connection = http.client.HTTPConnection("127.0.0.1", replicas[0].port, timeout=120)
    connection.request("POST", path, json.dumps(body), {"Content-Type": "application/json", **headers, **KEY_A})
    response = connection.getresponse()
    assert response.status == 200
    assert any(response.fp.readline().startswith(b"data: ") for _ in range(20))  # the first event (chunked)
    replicas[0].kill()
    connection.close()
    started = time.monotonic()
    arc = served(replicas[1], "chat", "killed", observations[:4], model)
    assert time.monotonic() - started < LEASE_S + 10
    assert arc["session"] == sid and arc["observations"] == 4
    described = call(replicas[1].base, "GET", f"/v1/arc/sessions/{sid}", headers=KEY_A)[1]
    assert described["occurrences"] == 4 and described["requests"] == 2
    assert stored_on(replicas[1], sid, observations) == 4
