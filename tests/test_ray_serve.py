"""``arc-vllm serve --ray-replicas 2``: ARC sessions over two engine replicas with Ray Serve (a
real local cluster in a loopback-only network namespace, the tiny model): every session sticks
to one replica and says which (``arc.replica``); when a replica's actor is killed mid-run, its
sessions continue on the other with every acknowledged observation.

    pytest tests/test_ray_serve.py
"""

import os
import signal
import threading

import pytest
from openai import APIStatusError, OpenAI

from arc_vllm.model_prep import prepare_tiny
from arc_vllm.serving.local import Server
from processes import processes_titled

pytestmark = pytest.mark.slow


def replica_actors() -> list[int]:
    return processes_titled(b"ray::ServeReplica:arc:engine")


def turn(session: int, index: int) -> list[dict]:
    return [{"role": "assistant", "content": f"session {session} step {index}"},
            {"role": "user", "content": f"observation {session}.{index}\n" + "x" * (40 * index)}]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ray-serve")
    server = Server(str(prepare_tiny()), folder / "front.log", "--ray-replicas", "2",
                    "--arc-store-dir", str(folder / "sessions"))
    try:
        yield server.wait(timeout=600)
    finally:
        server.stop()


def test_sessions_stick_to_one_replica_and_survive_its_loss(cluster):
    client = OpenAI(base_url=cluster.base + "/v1", api_key="none", max_retries=0)
    name = client.models.list().data[0].id
    sessions = [client.post("/arc/sessions", body={}, cast_to=object)["id"] for _ in range(12)]
    conversations = {sid: [{"role": "user", "content": "Find the port."}] for sid in sessions}
    served = {sid: [] for sid in sessions}

    def step(sid: int, index: int):
        conversations[sid] += turn(sessions.index(sid), index)
        reply = client.chat.completions.create(
            model=name, messages=conversations[sid], max_tokens=2,
            extra_body={"vllm_xargs": {"arc_session": sid}})
        arc = reply.model_extra["arc"]
        served[sid].append(arc["replica"])
        return arc

    for index in range(3):
        for sid in sessions:
            assert step(sid, index)["observations"] == index + 1
    assert all(len(set(replicas)) == 1 for replicas in served.values())  # affinity 1.0
    assert len({replicas[0] for replicas in served.values()}) == 2  # both replicas serve sessions

    # Kill one replica's actor while requests are in flight.
    [victim, _] = replica_actors()
    failures = []

    def keep_going(sid):
        for index in range(3, 6):
            try:
                step(sid, index)
            except APIStatusError as error:  # only the request in flight may fail, as a 503
                failures.append(error.status_code)

    threads = [threading.Thread(target=keep_going, args=(sid,)) for sid in sessions]
    for thread in threads:
        thread.start()
    os.kill(victim, signal.SIGKILL)
    for thread in threads:
        thread.join()
    assert set(failures) <= {503} and len(failures) <= len(sessions)
    # Every session goes on, with all it was sent: resending the conversation archives
    # whatever the lost request had not acknowledged, and nothing twice.
    for sid in sessions:
        arc = step(sid, 6)
        assert arc["observations"] == 7 and arc["replica"]
        described = client.get(f"/arc/sessions/{sid}", cast_to=object)
        assert described["observations"] == 7
