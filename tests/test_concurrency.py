"""One conversation, one session, under concurrency (issue 36), on the three agent APIs, against
a server without a store folder (``arc_server``) and one with (``keyed_server``: a store
folder and API keys):

- 20 requests of one conversation sent at once under the client's own conversation id, half of
  them streamed, each carrying one more observation than the last: one session, which holds
  every observation once, exactly;
- 10 streamed steps of two conversations in turn (two of each), each dropped after 4 events (a
  user pressing Esc) and followed at once by the next: one session per conversation, with
  every observation once, and the session's own view holds them.

    pytest tests/test_concurrency.py
"""

import time
import uuid

import pytest

from tests.helpers.agent_steps import APIS, burst, drop_after, signature, step
from tests.helpers.api_calls import call, log
from tests.helpers.conversations import visible_id

pytestmark = pytest.mark.slow
KEY = {"Authorization": "Bearer key-a"}  # accepted by both servers (arc_server checks no key)


@pytest.fixture(params=["memory", "store"])
def server(request, arc_server, keyed_server):
    return arc_server if request.param == "memory" else keyed_server


def model_of(server) -> str:
    return call(server.base, "GET", "/v1/models", headers=KEY)[1]["data"][0]["id"]


def sessions_of(server, client_id: str) -> list[dict]:
    listed = call(server.base, "GET", "/v1/arc/sessions", headers=KEY)[1]["sessions"]
    return [row for row in listed if row.get("client_id") == client_id]


def stored_once(server, sid: str, observations: list[str]) -> None:
    """The session holds exactly these observations, each once and exactly."""
    described = call(server.base, "GET", f"/v1/arc/sessions/{sid}", headers=KEY)[1]
    assert described["observations"] == len(observations)
    for index, observation in enumerate(observations):
        oid = visible_id(signature(index), observation)
        assert call(server.base, "GET", f"/v1/arc/sessions/{sid}/observations/{oid}", headers=KEY)[1] == observation


@pytest.mark.parametrize("api", APIS)
def test_twenty_requests_at_once_make_one_session(server, api):
    model, client_id = model_of(server), f"burst-{uuid.uuid4().hex[:8]}"
    observations = [log(index, lines=4) for index in range(20)]
    assert burst([server.base], api, client_id, observations, model, KEY) == [200] * 20
    [session] = sessions_of(server, client_id)
    stored_once(server, session["id"], observations)


@pytest.mark.parametrize("api", APIS)
def test_dropped_streams_leave_one_consistent_session_per_conversation(server, api):
    model = model_of(server)
    client_ids = [f"dropped-{uuid.uuid4().hex[:8]}" for _ in range(2)]
    observations = {client_id: [] for client_id in client_ids}
    for index in range(10):
        client_id = client_ids[index // 2 % 2]  # A, A, B, B, ...: a step right after its own, and after the other's
        observations[client_id].append(log(100 + index, lines=3))
        path, body, headers = step(api, client_id, observations[client_id], model, stream=True, max_tokens=48)
        assert drop_after(server.base, path, body, {**KEY, **headers}, events=4) == 4
    for client_id in client_ids:
        # The next step, whole: it continues the one session, which holds every observation.
        path, body, headers = step(api, client_id, observations[client_id], model)
        for _ in range(60):  # the dropped request's end may still be running
            status, answer, _ = call(server.base, "POST", path, body, {**KEY, **headers})
            if status != 409:
                break
            time.sleep(0.5)
        assert status == 200, answer
        [session] = sessions_of(server, client_id)
        assert answer["arc"]["session"] == session["id"]
        stored_once(server, session["id"], observations[client_id])
        view = str(call(server.base, "GET", f"/v1/arc/sessions/{session['id']}/view", headers=KEY)[1]["messages"])
        assert all(observation.strip() in view.replace("\\n", "\n") for observation in observations[client_id])
