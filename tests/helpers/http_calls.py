"""Talking to a test server over HTTP with the standard library: a JSON call, the
server-sent events of a streamed chat request as they arrive, and a client that leaves before
its answer (``leave_after``; ``running``: the engine's running requests).

    status, body = call(server.base, "POST", "/v1/arc/sessions", {})
    events = stream_events(server.base, {"model": m, "messages": [...], "stream": True})
"""

import json
import socket
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


def running(base: str) -> float:
    """The engine's running requests, from vLLM's own gauge."""
    metrics = urllib.request.urlopen(base + "/metrics", timeout=10).read().decode()
    return sum(float(line.split()[-1]) for line in metrics.splitlines()
               if line.startswith("vllm:num_requests_running"))


def leave_after(base: str, path: str, body: dict, headers: dict, seconds: float, watched: bool = True) -> None:
    """POST ``body``, then close the connection after ``seconds`` without reading the answer.
    ``watched``: check that ``base``'s engine runs it by then (not behind a front whose
    /metrics are those of one replica of several)."""
    host, port = base.removeprefix("http://").split(":")
    data = json.dumps(body).encode()
    head = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
    with socket.create_connection((host, int(port))) as connection:
        connection.sendall(f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
                           f"Content-Length: {len(data)}\r\n{head}Connection: close\r\n\r\n".encode() + data)
        deadline = time.monotonic() + seconds
        while watched and running(base) == 0 and time.monotonic() < deadline:  # the engine has begun
            time.sleep(0.1)
        assert not watched or running(base) >= 1
        time.sleep(max(0.0, deadline - time.monotonic()))
