"""One conversation in a client's own format for each agent API (chat completions, Anthropic
Messages, Responses), grown step by step, and the ``arc`` object of a request, streamed or not.

    conversation = Conversation("messages", model)
    conversation.tool(3, body, reasoning="I read log 3 next.")   # a tool call (with its thinking)
    conversation.said("Now run the tests.")                      # the assistant's text, the user's
    arc = arc_of(server.base, *conversation.request(stream=True))

Thinking is written as each API's clients send it back: chat ``reasoning``, an Anthropic
``thinking`` block (with a signature) before the assistant's other blocks, a Responses
``reasoning`` item before the assistant's items.
"""

import json
import urllib.request
import uuid

from tests.helpers.api_calls import call

TOOL_SCHEMA = {"type": "object", "properties": {"path": {"type": "string"}}}


class Conversation:
    """One conversation in the client's own format for ``api``, grown step by step."""

    def __init__(self, api: str, model: str, task: str = "Read every log and fix the failing request."):
        self.api, self.model, self.id = api, model, f"conv-{uuid.uuid4().hex[:12]}"
        self.items: list[dict] = [{"role": "user", "content": task}]

    def thinking(self, reasoning: str | None, number: int) -> list:
        """The thinking that leads an assistant turn, in this API's form (as a list to splice)."""
        if reasoning is None:
            return []
        if self.api == "messages":
            return [{"type": "thinking", "thinking": reasoning, "signature": f"sig-{number}"}]
        if self.api == "responses":
            return [{"type": "reasoning", "id": f"rs_{number}", "summary": [],
                     "content": [{"type": "reasoning_text", "text": reasoning}]}]
        return []

    def tool(self, index: int, body: str, typed: str | None = None, reasoning: str | None = None) -> None:
        """A tool call and its result; ``typed``: what the user typed while it ran;
        ``reasoning``: what the model thought before the call."""
        arguments = {"path": f"log{index}"}
        if self.api == "chat":
            assistant = {"role": "assistant", "content": "", "tool_calls": [{
                "id": f"c{index}", "type": "function", "function": {"name": "cat", "arguments": json.dumps(arguments)}}]}
            if reasoning is not None:
                assistant["reasoning"] = reasoning
            self.items += [assistant, {"role": "tool", "tool_call_id": f"c{index}", "content": body}]
            if typed is not None:
                self.items.append({"role": "user", "content": typed})
        elif self.api == "messages":
            result = [{"type": "tool_result", "tool_use_id": f"t{index}", "content": body}]
            self.items += [{"role": "assistant", "content": self.thinking(reasoning, index) + [
                               {"type": "tool_use", "id": f"t{index}", "name": "cat", "input": arguments}]},
                           {"role": "user", "content": result + ([{"type": "text", "text": typed}] if typed else [])}]
        else:
            self.items += self.thinking(reasoning, index) + [
                {"type": "function_call", "call_id": f"c{index}", "name": "cat", "arguments": json.dumps(arguments)},
                {"type": "function_call_output", "call_id": f"c{index}", "output": body}]
            if typed is not None:
                self.items.append({"role": "user", "content": typed})

    def said(self, text: str, reasoning: str | None = None, number: int = 0) -> None:
        """The assistant answers in text (after its thinking), and the user writes."""
        if self.api == "messages":
            self.items += [{"role": "assistant", "content": self.thinking(reasoning, number) + [
                               {"type": "text", "text": "Done. What next?"}]},
                           {"role": "user", "content": [{"type": "text", "text": text}]}]
        elif self.api == "responses":
            self.items += self.thinking(reasoning, number) + [{"role": "assistant", "content": "Done. What next?"},
                                                              {"role": "user", "content": text}]
        else:
            said = {"role": "assistant", "content": "Done. What next?"}
            if reasoning is not None:
                said["reasoning"] = reasoning
            self.items += [said, {"role": "user", "content": text}]

    def request(self, stream: bool, max_tokens: int = 2, **extra) -> tuple[str, dict, dict]:
        """(path, body, headers) of the next request; ``extra``: more body fields."""
        xargs = {"vllm_xargs": {"arc_debug": True, **extra.pop("vllm_xargs", {})}}
        if self.api == "chat":
            return "/v1/chat/completions", {"model": self.model, "messages": self.items, "max_tokens": max_tokens,
                                            "stream": stream, "tools": [{"type": "function", "function": {
                                                "name": "cat", "parameters": TOOL_SCHEMA}}], **xargs, **extra}, \
                {"X-Session-ID": self.id}
        if self.api == "messages":
            return "/v1/messages", {"model": self.model, "messages": self.items, "max_tokens": max_tokens,
                                    "stream": stream, "tools": [{"name": "cat", "input_schema": TOOL_SCHEMA}],
                                    **xargs, **extra}, {"X-Claude-Code-Session-Id": self.id}
        return "/v1/responses", {"model": self.model, "input": self.items, "max_output_tokens": max_tokens,
                                 "stream": stream, "store": False, "prompt_cache_key": self.id,
                                 "tools": [{"type": "function", "name": "cat", "parameters": TOOL_SCHEMA}],
                                 **xargs, **extra}, {}


def stream_data(base: str, path: str, body: dict, headers: dict) -> list[dict]:
    """The JSON data of every server-sent event of a streamed request, in order."""
    request = urllib.request.Request(base + path, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json", **headers})
    data = []
    with urllib.request.urlopen(request, timeout=300) as response:
        assert response.headers["Content-Type"].startswith("text/event-stream")
        for line in response:
            line = line.decode().strip()
            if line.startswith("data: ") and line[6:] != "[DONE]":
                data.append(json.loads(line[6:]))
    return data


def arc_of(base: str, path: str, body: dict, headers: dict) -> dict:
    """The ``arc`` object of one request, streamed or not (it rides the last event)."""
    if not body["stream"]:
        status, answer, _ = call(base, "POST", path, body, headers)
        assert status == 200, answer
        return answer["arc"]
    found = None
    for data in stream_data(base, path, body, headers):
        found = data.get("arc") or (data.get("response") or {}).get("arc") or found
    assert found is not None, "no arc object in the stream"
    return found
