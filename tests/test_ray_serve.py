"""``arc-vllm serve --ray-replicas 2``: ARC sessions over two engine replicas with Ray Serve (a
real local cluster in a loopback-only network namespace, the tiny model, sessions in Redis):
every session sticks to one replica and says which (``arc.replica``); when a replica's actor is
killed mid-run, its sessions continue on the other with every acknowledged observation. A
cluster you run (``--ray-address``) is served over a store folder.

    pytest tests/test_ray_serve.py
"""

import json
import os
import re
import signal
import threading
import time

import pytest
from openai import APIStatusError, OpenAI

from arc_vllm.model_prep import prepare_tiny
from arc_vllm.serving.local import RedisServer, Server
from tests.helpers.agent_steps import APIS, drop_after, step
from tests.helpers.api_calls import call, log
from tests.helpers.http_calls import leave_after, stream_events
from tests.helpers.processes import processes_titled

pytestmark = [pytest.mark.slow, pytest.mark.memory(9)]  # Ray, a front and two engine replicas


KEY_A = {"Authorization": "Bearer key-a"}


def replica_actors() -> list[int]:
    return processes_titled(b"ray::ServeReplica:arc:engine")


def turn(session: int, index: int) -> list[dict]:
    return [{"role": "assistant", "content": f"session {session} step {index}"},
            {"role": "user", "content": f"observation {session}.{index}\n" + "x" * (40 * index)}]


# First in the module, before the two-replica cluster below starts: with that cluster's
# Ray alive beside it, this test's own cluster took three times as long (205 s against 62 s).
def test_ray_address_joins_a_cluster_you_run(tmp_path):
    """``--ray-address``: a Ray cluster started with ``ray start`` (here inside a loopback-only
    namespace, as every Ray process here is), the front on ``--host/--port`` itself."""
    import subprocess
    import sys
    from pathlib import Path

    from arc_vllm.ray_cluster import isolated_command, isolated_environment

    bin_dir = Path(sys.executable).parent
    client = (
        "import json, time, urllib.request\n"
        "base = 'http://127.0.0.1:8199'\n"
        "for _ in range(600):\n"
        "    try:\n"
        "        urllib.request.urlopen(base + '/health', timeout=2); break\n"
        "    except OSError:\n"
        "        time.sleep(1)\n"
        "def post(path, body):\n"
        "    request = urllib.request.Request(base + path, json.dumps(body).encode(),\n"
        "                                     {'Content-Type': 'application/json'})\n"
        "    return json.loads(urllib.request.urlopen(request, timeout=120).read())\n"
        "sid = post('/v1/arc/sessions', {})['id']\n"
        "model = json.loads(urllib.request.urlopen(base + '/v1/models').read())['data'][0]['id']\n"
        "reply = post('/v1/chat/completions', {'model': model, 'max_tokens': 2, 'messages': [\n"
        "    {'role': 'user', 'content': 'hello'}], 'vllm_xargs': {'arc_session': sid}})\n"
        "print('REPLICA', reply['arc']['replica'], reply['arc']['session'] == sid)\n")
    (tmp_path / "client.py").write_text(client)
    script = f"""
    set -u
    {bin_dir / 'ray'} start --head --port=6390 --num-cpus=2 --include-dashboard=false \\
        --node-ip-address=127.0.0.1 --object-store-memory=200000000 --disable-usage-stats \\
        > {tmp_path / 'ray.log'} 2>&1 || exit 3
    {bin_dir / 'arc-vllm'} serve {prepare_tiny()} --ray-replicas 1 --ray-address 127.0.0.1:6390 \\
        --arc-store-dir {tmp_path / 'sessions'} --port 8199 --enforce-eager --max-model-len 4096 \\
        > {tmp_path / 'serve.log'} 2>&1 &
    front=$!
    {sys.executable} {tmp_path / 'client.py'}
    code=$?
    kill -TERM $front; wait $front; echo "STOPPED $?"
    {sys.executable} -c "import socket; socket.create_connection(('127.0.0.1', 8199), 2)" 2>/dev/null && echo SERVING
    {bin_dir / 'ray'} stop --force > /dev/null 2>&1
    exit $code
    """
    done = subprocess.run(isolated_command(["bash", "-c", script]), env=isolated_environment(),
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:] + \
        (tmp_path / "serve.log").read_text()[-3000:]
    assert re.search(r"^REPLICA \S+ True$", done.stdout, re.M), done.stdout
    # A SIGTERM to the command stops the front it runs (nothing serves on its port) and removes
    # the folder of the replicas' logs, which it named.
    assert "STOPPED 0" in done.stdout and "SERVING" not in done.stdout, done.stdout
    logs = re.search(r"\(logs in (\S+)\)", (tmp_path / "serve.log").read_text()).group(1)
    assert not Path(logs).parent.exists(), logs


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """Two replicas over one Redis (``--arc-store``): its unix socket, which reaches into the
    cluster's loopback-only network namespace."""
    folder = tmp_path_factory.mktemp("ray-serve")
    redis = RedisServer(folder / "redis").start()
    server = Server(str(prepare_tiny()), folder / "front.log", "--ray-replicas", "2",
                    "--arc-store", redis.socket_url(),
                    "--api-key", "key-a", "key-b", "ops", "--arc-admin-key", "ops")
    try:
        yield server.wait(timeout=600)
    finally:
        server.stop()
        redis.stop()


@pytest.mark.quiet
def test_a_streamed_answer_streams_through_the_front(cluster):
    """The Ray front does not buffer: events arrive as the engine makes them (first, while
    both replicas are up and the machine is quiet: a replacement's start-up would slow the
    engine enough for vLLM to merge deltas)."""
    client = OpenAI(base_url=cluster.base + "/v1", api_key="key-a", max_retries=0)
    model = client.models.list().data[0].id
    sid = client.post("/arc/sessions", body={}, cast_to=object)["id"]
    events = stream_events(cluster.base, headers=KEY_A, body={
        "model": model, "max_tokens": 64, "ignore_eos": True, "stream": True,
        "messages": [{"role": "user", "content": "hello"}], "vllm_xargs": {"arc_session": sid}})
    assert events[-1][1] == "[DONE]" and len(events) >= 32
    assert events[0][0] < 0.5 * events[-2][0]  # the first event long before the last
    assert events[-2][1]["arc"]["session"] == sid and events[-2][1]["arc"]["replica"]


def test_a_client_that_leaves_stops_its_request_through_the_front(cluster):
    """A client gone before its whole answer cancels the replica's request too: the front
    closes its call to the replica, whose ARC route cancels the engine's request, so the
    session's record says no answer went out (a request left running would end answered)."""
    client = OpenAI(base_url=cluster.base + "/v1", api_key="key-a", max_retries=0)
    model = client.models.list().data[0].id
    sid = client.post("/arc/sessions", body={}, cast_to=object)["id"]
    leave_after(cluster.base, "/v1/chat/completions", {
        "model": model, "max_tokens": 3000, "ignore_eos": True,
        "messages": [{"role": "user", "content": "Count to a thousand."}]}, {**KEY_A, "X-ARC-Session": sid},
        seconds=3.0, watched=False)
    left, records = time.monotonic(), []
    while not records and time.monotonic() - left < 120:
        time.sleep(0.5)
        _, records, _ = call(cluster.base, "GET", f"/v1/arc/sessions/{sid}/requests", headers=KEY_A)
    assert len(records) == 1 and records[0]["unanswered"] is True, records


def test_the_agent_apis_route_by_session_through_the_front(cluster):
    """The Anthropic Messages API (Claude Code's session header) and the Responses API (its
    prompt_cache_key, then previous_response_id), streamed and not: each conversation on one
    replica, in one session, its events streamed through."""
    import anthropic

    client = OpenAI(base_url=cluster.base + "/v1", api_key="key-a", max_retries=0)
    model = client.models.list().data[0].id
    claude = anthropic.Anthropic(base_url=cluster.base, api_key="key-a", max_retries=0,
                                 default_headers={"X-Claude-Code-Session-Id": "ray-cc"})
    messages, arcs = [{"role": "user", "content": "List the files."}], []
    for index in range(3):
        messages += [{"role": "assistant", "content": [{"type": "tool_use", "id": f"t{index}", "name": "ls", "input": {}}]},
                     {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{index}", "content": f"file{index}\n" * 50}]}]
        if index % 2:
            with claude.messages.stream(model=model, max_tokens=4, messages=messages) as stream:
                arcs.append(next(event.model_extra["arc"] for event in stream if event.type == "message_delta"))
        else:
            arcs.append(claude.messages.create(model=model, max_tokens=4, messages=messages).model_extra["arc"])
        messages += [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "next"}]
    assert len({(arc["session"], arc["replica"]) for arc in arcs}) == 1
    items = [{"role": "user", "content": "Read the log."},
             {"type": "function_call", "call_id": "c0", "name": "cat", "arguments": "{}"},
             {"type": "function_call_output", "call_id": "c0", "output": "line\n" * 40}]
    first = client.responses.create(model=model, input=items, max_output_tokens=4, store=False, prompt_cache_key="ray-codex")
    with client.responses.stream(model=model, input=items + [{"role": "user", "content": "more"}], max_output_tokens=4,
                                 store=False, prompt_cache_key="ray-codex") as stream:
        second = stream.get_final_response()
    third = client.responses.create(model=model, input="and then?", previous_response_id=second.id, max_output_tokens=4)
    served = {(answer.model_extra["arc"]["session"], answer.model_extra["arc"]["replica"]) for answer in (first, second, third)}
    assert len(served) == 1 and third.model_extra["arc"]["observations"] >= 1


@pytest.mark.parametrize("api", APIS)
def test_callers_and_one_conversation_per_session_through_the_front(cluster, api):
    """Behind the front, as on one server: 10 requests of one conversation at once (half
    streamed) make one session, on one replica, with every observation once, and so do steps
    sent the moment the last one's stream was dropped; another key
    reaches it by no name (header, vllm_xargs, previous_response_id) and reads nothing of it;
    the operator's key lists it."""
    base = cluster.base
    model = call(base, "GET", "/v1/models", headers=KEY_A)[1]["data"][0]["id"]
    client_id, observations, answers = f"ray-burst-{api}", [log(index, lines=4) for index in range(10)], []

    def send(count):
        path, body, headers = step(api, client_id, observations[:count], model, stream=count % 2 == 0)
        answers.append(call(base, "POST", path, body, {**KEY_A, **headers})[:2])

    threads = [threading.Thread(target=send, args=(count,)) for count in range(1, 11)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [status for status, _ in answers] == [200] * 10
    listed = call(base, "GET", "/v1/arc/sessions", headers={"Authorization": "Bearer ops"})[1]["sessions"]
    [session] = [row for row in listed if row.get("client_id") == client_id]
    assert session["observations"] == 10
    replicas = {answer["arc"]["replica"] for _, answer in answers if isinstance(answer, dict) and "arc" in answer}
    assert len(replicas) <= 1  # the non-streamed answers say which: one
    sid, other = session["id"], {"Authorization": "Bearer key-b"}
    path, body, headers = step(api, None, observations[:2], model)
    for attempt in ({**other, **headers, "X-ARC-Session": sid}, None):
        sent = dict(body, vllm_xargs={"arc_session": sid, "arc_debug": True}) if attempt is None else body
        status, error, _ = call(base, "POST", path, sent, attempt or {**other, **headers})
        assert status == 404 and "log 0 line" not in json.dumps(error)
    for route in (f"/v1/arc/sessions/{sid}", f"/v1/arc/sessions/{sid}/view", f"/v1/arc/sessions/{sid}/search?q=log"):
        assert call(base, "GET", route, headers=other)[0] == 404
        assert call(base, "GET", route, headers=KEY_A)[0] == 200
    # Streams dropped after 4 events, each step sent the moment the last was dropped: one session.
    dropped = f"ray-dropped-{api}"
    for count in range(1, 5):
        path, body, headers = step(api, dropped, observations[:count], model, stream=True, max_tokens=48)
        assert drop_after(base, path, body, {**KEY_A, **headers}, events=4) == 4
    path, body, headers = step(api, dropped, observations[:4], model)
    assert call(base, "POST", path, body, {**KEY_A, **headers})[0] == 200
    listed = call(base, "GET", "/v1/arc/sessions", headers={"Authorization": "Bearer ops"})[1]["sessions"]
    assert [row["observations"] for row in listed if row.get("client_id") == dropped] == [4]
    if api == "responses":
        rid = next(answer["id"] for status, answer in answers if isinstance(answer, dict) and "id" in answer)
        status, _, _ = call(base, "POST", "/v1/responses", {"model": model, "input": "x", "max_output_tokens": 2,
                                                             "previous_response_id": rid}, other)
        assert status == 404


def test_sessions_stick_to_one_replica_and_survive_its_loss(cluster):
    client = OpenAI(base_url=cluster.base + "/v1", api_key="key-a", max_retries=0)
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
