"""One conversation's steps on each agent API, as its clients send them: a task, then one tool
call and its result per observation, under the client's own conversation id (chat:
``X-Session-ID``; Messages: Claude Code's ``X-Claude-Code-Session-Id``; Responses: Codex's
``prompt_cache_key``); and a streamed step the client drops after a few events.

    path, body, headers = step("messages", "conv-1", ["obs 0", "obs 1"], model, stream=True)
    drop_after(server.base, path, body, headers, events=4)
    statuses = burst([server.base], "responses", "conv-2", observations, model)   # all at once
"""

import http.client
import json
import threading
from urllib.parse import urlsplit

APIS = ("chat", "messages", "responses")
TASK = "Read the logs and find the failing request."


def signature(index: int) -> str:
    """The store's action signature of the ``index``-th call (``cat({"path": "logN"})``)."""
    return f'cat({json.dumps({"path": f"log{index}"})})'


def step(api: str, client_id: str | None, observations: list[str], model: str, stream: bool = False,
         max_tokens: int = 2) -> tuple[str, dict, dict]:
    """(path, body, headers) of the step that carries ``observations`` (oldest first)."""
    arguments = [{"path": f"log{index}"} for index in range(len(observations))]
    if api == "chat":
        messages = [{"role": "user", "content": TASK}]
        for index, (observation, argument) in enumerate(zip(observations, arguments)):
            messages += [{"role": "assistant", "content": "", "tool_calls": [{
                "id": f"c{index}", "type": "function",
                "function": {"name": "cat", "arguments": json.dumps(argument)}}]},
                {"role": "tool", "tool_call_id": f"c{index}", "content": observation}]
        body = {"model": model, "messages": messages, "max_tokens": max_tokens, "stream": stream}
        return "/v1/chat/completions", body, {"X-Session-ID": client_id} if client_id else {}
    if api == "messages":
        messages = [{"role": "user", "content": TASK}]
        for index, (observation, argument) in enumerate(zip(observations, arguments)):
            messages += [{"role": "assistant", "content": [
                {"type": "tool_use", "id": f"t{index}", "name": "cat", "input": argument}]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": f"t{index}", "content": observation}]}]
        body = {"model": model, "messages": messages, "max_tokens": max_tokens, "stream": stream}
        return "/v1/messages", body, {"X-Claude-Code-Session-Id": client_id} if client_id else {}
    items = [{"role": "user", "content": TASK}]
    for index, (observation, argument) in enumerate(zip(observations, arguments)):
        items += [{"type": "function_call", "call_id": f"c{index}", "name": "cat",
                   "arguments": json.dumps(argument)},
                  {"type": "function_call_output", "call_id": f"c{index}", "output": observation}]
    body = {"model": model, "input": items, "max_output_tokens": max_tokens, "stream": stream, "store": False}
    if client_id:
        body["prompt_cache_key"] = client_id
    return "/v1/responses", body, {}


def drop_after(base: str, path: str, body: dict, headers: dict, events: int = 4) -> int:
    """Send a streamed request, read ``events`` server-sent events, and close the connection
    (a user pressing Esc); how many were read."""
    address = urlsplit(base)
    connection = http.client.HTTPConnection(address.hostname, address.port, timeout=120)
    connection.request("POST", path, json.dumps(body), {"Content-Type": "application/json", **headers})
    response = connection.getresponse()
    assert response.status == 200, response.read()[:500]
    read = 0
    while read < events:
        line = response.fp.readline()
        if not line:
            break
        read += line.startswith(b"data: ")
    connection.sock.close()  # no goodbye: the server finds the client gone
    connection.close()
    return read


def burst(bases: list[str], api: str, client_id: str | None, observations: list[str], model: str,
          headers: dict | None = None) -> list:
    """Every step of one conversation at once (step k carries the first k observations; the
    even ones streamed), step k to ``bases[k % len(bases)]``: the statuses, an error's body
    beside its status."""
    from tests.helpers.api_calls import call

    statuses = []

    def send(count: int):
        path, body, step_headers = step(api, client_id, observations[:count], model, stream=count % 2 == 0)
        status, answer, _ = call(bases[count % len(bases)], "POST", path, body, {**(headers or {}), **step_headers})
        statuses.append(status if status == 200 else (status, answer))

    threads = [threading.Thread(target=send, args=(count,)) for count in range(1, len(observations) + 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return statuses
