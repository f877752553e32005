"""Talking to a test server over HTTP with the standard library: a JSON call, and the
server-sent events of a streamed chat request as they arrive.

    status, body = call(server.base, "POST", "/v1/arc/sessions", {})
    events = stream_events(server.base, {"model": m, "messages": [...], "stream": True})
"""

import json
import time
import urllib.error
import urllib.request


def call(base, method, path, body=None, headers=None):
    """(status, JSON or raw bytes) of one request."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            raw = response.read()
            kind = response.headers.get("Content-Type", "")
            return response.status, (json.loads(raw) if "json" in kind else raw)
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def stream_events(base: str, body: dict, headers: dict | None = None) -> list[tuple[float, dict]]:
    """(arrival time, event) of each server-sent event of a streamed chat request, as it arrives."""
    request = urllib.request.Request(base + "/v1/chat/completions", data=json.dumps(body).encode(),
                                     method="POST", headers={"Content-Type": "application/json",
                                                             **(headers or {})})
    started, events = time.perf_counter(), []
    with urllib.request.urlopen(request, timeout=300) as response:
        assert response.headers["Content-Type"].startswith("text/event-stream")
        for line in response:
            line = line.decode().strip()
            if line.startswith("data: "):
                events.append((time.perf_counter() - started,
                               line[6:] if line[6:] == "[DONE]" else json.loads(line[6:])))
    return events


def streamed_text(events) -> str:
    return "".join(event["choices"][0]["delta"].get("content") or "" for _, event in events
                   if isinstance(event, dict) and event.get("choices"))
