"""An engine that answers like vLLM's chat handler, for the ARC path without a server: the one
fault a real engine never shows here (refusing a view as too long: ARC's own bound prevents
it) on demand, and the tool calls a test wants the model to make.

    engine = FakeEngine(refusals=2)            # two context-length refusals, then "done"
    engine = FakeEngine(0, tool_calls=[...])   # these tool calls, one per call, then "done"
"""

from types import SimpleNamespace


class Result(SimpleNamespace):
    def model_dump(self, **_):
        return {"id": "x", "object": "chat.completion", "created": 0, "model": "m",
                "choices": [{"index": 0, "message": {"role": "assistant",
                                                     "content": self.choices[0].message.content},
                             "finish_reason": "stop"}]}


class Refusal(SimpleNamespace):
    def model_dump(self, **_):
        return {"error": {"message": self.message, "type": "BadRequestError", "code": 400}}


class FakeEngine:
    """Refuses the first ``refusals`` prompts as too long, then answers ``text`` (or, while
    ``tool_calls`` lasts, the next of those tool calls)."""

    def __init__(self, refusals, text="done", tool_calls=()):
        self.refusals, self.text, self.requests = refusals, text, []
        self.tool_calls = list(tool_calls)

    async def create_chat_completion(self, request, raw_request):
        self.requests.append(request)
        if len(self.requests) <= self.refusals:
            return Refusal(message="This model's maximum context length is 4096 tokens. However, "
                                   "your prompt contains 5000 input tokens.", error=SimpleNamespace(code=400))
        calls = [self.tool_calls.pop(0)] if self.tool_calls else None
        message = SimpleNamespace(content=None if calls else self.text, tool_calls=calls, reasoning=None)  # vLLM's fields
        usage = SimpleNamespace(prompt_tokens=100, prompt_tokens_details=SimpleNamespace(cached_tokens=64))
        return Result(choices=[SimpleNamespace(message=message)], usage=usage)


def conversation(count):
    messages = [{"role": "user", "content": "task"}]
    for index in range(count):
        messages += [{"role": "assistant", "content": "", "tool_calls": [
            {"id": f"c{index}", "type": "function", "function": {"name": "cat", "arguments": str(index)}}]},
                     {"role": "tool", "tool_call_id": f"c{index}", "content": f"line {index}\n" * 40}]
    return messages
