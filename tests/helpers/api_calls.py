"""Talking to the shared test servers as the agent-API tests do: a call that returns the status,
the body (JSON, or text) and the headers, with a raw body when asked; the served model's id;
a log-shaped observation; and how many observations a session holds exactly.

    status, body, headers = call(server.base, "POST", "/v1/messages", {...}, {"x-api-key": "k"})
"""

import json
import urllib.error
import urllib.request


def call(base, method, path, body=None, headers=None, raw=None):
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    request = urllib.request.Request(base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=300) as response:
            text = response.read()
            return response.status, (json.loads(text) if text[:1] in b"{[" else text.decode()), response.headers
    except urllib.error.HTTPError as error:
        text = error.read()
        return error.code, (json.loads(text) if text[:1] in b"{[" else text.decode()), error.headers


def model_of(server) -> str:
    return call(server.base, "GET", "/v1/models")[1]["data"][0]["id"]


def log(index: int, lines: int = 120) -> str:
    return "".join(f"log {index} line {n}: status ok, latency {n * 7 % 97} ms\n" for n in range(lines))


def stored_exactly(server, sid: str, observations: dict[str, str]) -> int:
    return sum(call(server.base, "GET", f"/v1/arc/sessions/{sid}/observations/{id}")[1] == body
               for id, body in observations.items())
