"""One session grown to N steps on each API, three ways (part 6 of ``bench/serving.py``,
``--compaction N``; writes runs/bench/serving_compaction.json):

    resent      the whole conversation sent each step (a client that never compacts: it
                reads ARC's bounded view as usage)
    turns       the client compacts on its own (Codex's summary prompt) once its conversation
                passes half the window: ARC answers from the store; the client keeps the
                handoff in place of its history and goes on
    api         the provider's compaction API (Responses ``/v1/responses/compact`` and the
                compaction item; Anthropic ``compact_20260112``, paused, and the compaction
                block): the client sends the handle and what is new

The observations are the tool outputs of a real mini-swe-agent trajectory
(``tests/fixtures/agent_logs/mini_swe_agent.traj.json``, each at most 3,000 characters), cycled with the step number in them
so each is new. Each step asks for one token. Reported at the checkpoints (100, 400 and N):
per-request latency and ``arc_ms`` (medians of the last 10 requests before it), bytes sent;
each compaction's time and tokens decoded (ARC: 0), and at the end the observations stored
and how many come back exactly (``GET .../observations/{id}``, by the ids the store gives).
"""

from __future__ import annotations

import json
import statistics
import time
import urllib.parse
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TRAJECTORY = REPO / "tests" / "fixtures" / "agent_logs" / "mini_swe_agent.traj.json"
CODEX_PROMPT = ("You are performing a CONTEXT CHECKPOINT COMPACTION. Create a handoff summary for another LLM "
                "that will resume the task.")
CODEX_PREFIX = ("Another language model started to solve this problem and produced a summary of its thinking "
                "process. Here is the summary produced by the other language model:\n")


def observations() -> list[str]:
    """The trajectory's tool outputs, each at most 3,000 characters (1,600 steps resent whole
    are then about 5 MB, as measured in issue 35)."""
    messages = json.loads(TRAJECTORY.read_text())["messages"]
    return [message["content"][:3000] for message in messages[2:] if message["role"] == "user"]


def post(base: str, path: str, body: dict, headers: dict | None = None) -> tuple[dict, float, int]:
    data = json.dumps(body).encode()
    request = urllib.request.Request(base + path, data=data, method="POST",
                                     headers={"Content-Type": "application/json", "Authorization": "Bearer bench",
                                              **(headers or {})})
    started = time.perf_counter()
    with urllib.request.urlopen(request, timeout=600) as response:
        answer = json.loads(response.read())
    return answer, (time.perf_counter() - started) * 1000, len(data)


class Conversation:
    """One API's session: the items the client holds, and how to send a step in that API's form."""

    def __init__(self, api: str, way: str, model: str, bodies: list[str]):
        self.api, self.way, self.model, self.bodies = api, way, model, bodies
        self.held: list = []       # the client's history in its API's form
        self.handle = None         # the compaction item or block the client keeps (api way)

    def step_items(self, index: int) -> list:
        body = f"[step {index}]\n" + self.bodies[index % len(self.bodies)]
        arguments = json.dumps({"command": f"step {index}"})
        if self.api == "chat":
            return [{"role": "assistant", "content": "", "tool_calls": [
                        {"id": f"c{index}", "type": "function", "function": {"name": "bash", "arguments": arguments}}]},
                    {"role": "tool", "tool_call_id": f"c{index}", "content": body}]
        if self.api == "responses":
            return [{"type": "function_call", "call_id": f"c{index}", "name": "bash", "arguments": arguments},
                    {"type": "function_call_output", "call_id": f"c{index}", "output": body}]
        return [{"role": "assistant", "content": [{"type": "tool_use", "id": f"t{index}", "name": "bash",
                                                   "input": {"command": f"step {index}"}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{index}", "content": body}]}]

    def task(self) -> list:
        # One conversation per API and way: the same words would continue one another's session.
        return [{"role": "user", "content": f"Fix the failing test in the repository ({self.api}, {self.way})."}]

    def request(self, extra: dict | None = None) -> tuple[str, dict]:
        items = ([self.handle] if self.handle is not None and self.api == "responses" else []) + self.held
        if self.api == "chat":
            return "/v1/chat/completions", {"model": self.model, "messages": items, "max_tokens": 1,
                                            "tools": [{"type": "function", "function": {"name": "bash", "parameters": {
                                                "type": "object", "properties": {"command": {"type": "string"}}}}}],
                                            **(extra or {})}
        if self.api == "responses":
            return "/v1/responses", {"model": self.model, "input": items, "max_output_tokens": 1, "store": False,
                                     "tools": [{"type": "function", "name": "bash", "parameters": {
                                         "type": "object", "properties": {"command": {"type": "string"}}}}],
                                     **(extra or {})}
        return "/v1/messages", {"model": self.model, "messages": items, "max_tokens": 1,
                                "tools": [{"name": "bash", "input_schema": {"type": "object", "properties": {
                                    "command": {"type": "string"}}}}], **(extra or {})}


def run_way(base: str, model: str, api: str, way: str, steps: int, checkpoints: list[int], window: int,
            probe=None) -> dict:
    """``probe()``: a counter read after each request (the session store's bytes received, say);
    each checkpoint then has its median growth per request (``probe_per_request``)."""
    bodies = observations()
    conversation = Conversation(api, way, model, bodies)
    conversation.held = conversation.task()
    rows, compactions, session = [], [], None
    interval, last = None, -1   # steps between compactions: as many as first filled half the window
    for index in range(steps):
        conversation.held += conversation.step_items(index)
        path, body = conversation.request()
        answer, ms, sent = post(base, path, body)
        arc = answer["arc"]
        session = session or arc["session"]
        if arc["session"] != session:
            raise RuntimeError(f"{api}/{way}: step {index} went to session {arc['session']}, not {session}")
        rows.append({"ms": ms, "arc_ms": arc["arc_ms"], "engine_ms": arc.get("engine_ms", 0.0),
                     "route_ms": arc.get("route_ms", 0.0), "bytes": sent, "store_ms": arc.get("store_ms", 0.0),
                     "store_round_trips": arc.get("store_round_trips", 0), "probe": probe() if probe else None,
                     "conversation_tokens": arc.get("conversation_tokens")})
        if interval is None and (arc.get("conversation_tokens") or 0) > window // 2:
            interval = index - last
        over = interval is not None and index - last >= interval
        if over and way != "resent":
            last = index
        if way == "turns" and over:
            conversation.held.append({"role": "user", "content": CODEX_PROMPT})
            path, body = conversation.request()
            answer, ms, _ = post(base, path, body)
            record = answer["arc"]["client_compaction"]
            compactions.append({"step": index, "ms": round(ms, 1), "arc_ms": record["ms"],
                                "decoded_tokens": record["decoded_tokens"]})
            text = handoff_text(api, answer)
            conversation.held = conversation.task() + [{"role": "user", "content": CODEX_PREFIX + text}]
        elif way == "api" and over:
            handle, ms, decoded = compact_api(base, conversation)
            compactions.append({"step": index, "ms": round(ms, 1), "decoded_tokens": decoded})
            conversation.handle = handle
            conversation.held = [] if api == "responses" else [
                conversation.task()[0], {"role": "assistant", "content": [handle]}]
    summary = {str(point): checkpoint(rows, point) for point in checkpoints if point <= steps}
    stored, exact = recallable(base, session, bodies, steps)
    return {"checkpoints": summary, "compactions": len(compactions),
            "compaction_ms_median": median([c["ms"] for c in compactions]),
            "compaction_decoded_tokens": sum(c["decoded_tokens"] for c in compactions),
            "bytes_sent_total": sum(row["bytes"] for row in rows), "observations_sent": steps,
            "observations_stored": stored, "observations_exact": exact}


def handoff_text(api: str, answer: dict) -> str:
    if api == "chat":
        return answer["choices"][0]["message"]["content"]
    if api == "responses":
        return "".join(part["text"] for item in answer["output"] if item["type"] == "message"
                       for part in item["content"] if part.get("type") == "output_text")
    return "".join(block.get("text", "") for block in answer["content"] if block["type"] == "text")


def compact_api(base: str, conversation: Conversation):
    """The provider's compaction call; the item or block the client keeps."""
    if conversation.api == "responses":
        path, body = conversation.request()
        body = {key: body[key] for key in ("model", "input")}
        answer, ms, _ = post(base, "/v1/responses/compact", body)
        return answer["output"][-1], ms, answer["arc"]["compaction"]["decoded_tokens"]
    path, body = conversation.request({"context_management": {"edits": [
        {"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 1}, "pause_after_compaction": True}]}})
    answer, ms, _ = post(base, path, body, {"anthropic-beta": "compact-2026-01-12"})
    return answer["content"][0], ms, answer["arc"]["compaction"]["decoded_tokens"]


def checkpoint(rows: list[dict], point: int) -> dict:
    window = rows[max(0, point - 10):point]
    probed = {}
    if window and window[0]["probe"] is not None and point > len(window):
        before = [rows[point - len(window) - 1]] + window
        probed["probe_per_request"] = median([after["probe"] - earlier["probe"] for earlier, after in zip(before, window)])
    return {**probed, "latency_ms": round(median([row["ms"] for row in window]), 1),
            "arc_ms": round(median([row["arc_ms"] for row in window]), 2),
            "route_ms": round(median([row["route_ms"] for row in window]), 2),
            "engine_ms": round(median([row["engine_ms"] for row in window]), 1),
            "store_ms": round(median([row["store_ms"] for row in window]), 2),
            "store_round_trips": median([row["store_round_trips"] for row in window]),
            "bytes_sent": window[-1]["bytes"]}


def median(values: list[float]) -> float:
    return statistics.median(values) if values else 0.0


def recallable(base: str, session: str, bodies: list[str], steps: int) -> tuple[int, int]:
    """Observations stored, and how many of those sent come back exactly by id (each found by
    its step line, then read back whole)."""
    exact = 0
    for index in range(steps):
        expected = f"[step {index}]\n" + bodies[index % len(bodies)]
        query = urllib.parse.quote(f"[step {index}]\n")
        with urllib.request.urlopen(f"{base}/v1/arc/sessions/{session}/search?q={query}&limit=5") as response:
            hits = json.loads(response.read())["results"]
        for hit in hits:
            with urllib.request.urlopen(f"{base}/v1/arc/sessions/{session}/observations/{hit['id']}") as response:
                if response.read().decode() == expected:
                    exact += 1
                    break
    with urllib.request.urlopen(f"{base}/v1/arc/sessions/{session}") as response:
        stored = json.loads(response.read())["observations"]
    return stored, exact


def compaction(base: str, model: str, steps: int, window: int) -> dict:
    checkpoints = sorted({100, 400, steps})
    results = {}
    for api in ("chat", "responses", "messages"):
        for way in ("resent", "turns", "api"):
            if way == "api" and api == "chat":
                continue  # chat completions has no compaction API of its own
            started = time.perf_counter()
            results[f"{api}/{way}"] = run_way(base, model, api, way, steps, checkpoints, window)
            results[f"{api}/{way}"]["wall_s"] = round(time.perf_counter() - started, 1)
            print(f"{api}/{way}: {json.dumps(results[f'{api}/{way}'])}", flush=True)
    return results
