"""A streamed ARC answer (``stream: true``): the engine's deltas reach the client as they are made.

    open_stream(...)   archive, render, start the first engine call: an error up to here is
                       an HTTP error (4xx), as for a non-streamed request
    relay(...)         vLLM's chat.completion.chunk events, decoded once, passed through
                       ``HeldBack`` (``serving/step/stream_filter.py``): only what may still be an
                       ARC command is held. When the generation held one, the client has seen
                       none of it: the command is served here and the continuation streams like
                       any answer.

The step yields chunk objects (dicts); only the API's adapter writes event text (chat
completions: ``data: {chunk}``, then ``data: [DONE]``; ``serving/apis/``). The chunks end with
the final generation's ``finish_reason`` chunk, then (with ``stream_options.include_usage``)
the usage chunk. The ``arc`` object rides the last: the usage chunk when usage was asked for,
else the ``finish_reason`` chunk. An error after the first chunk is a chunk holding ``error``,
and the last. The request holds its session (``SessionManager.using``: its lock, its store's hold)
from before the first chunk to after the last, so a session's requests run one at a time,
streamed or not.
"""

from __future__ import annotations

import json

from arc_vllm.serving.compaction.ask import NOTHING_CONTINUED, appended
from arc_vllm.serving.errors import EngineError, openai_error, SessionError
from arc_vllm.serving.step.chat import ChatStep, answer_of, answered_alone, check_body, prepared
from arc_vllm.serving.step.stream_filter import HeldBack
from arc_vllm.serving.step.tools import ARC_TOOL_NAMES


async def open_stream(body: dict, session, engine, raw_request=None, **options):
    """Start a streamed step on ``engine`` (``options``: ``ChatStep``'s keywords); returns the
    iterator of its chunks. Raises ``SessionError`` or ``EngineError`` when the request fails
    before its first chunk. A compaction answered alone (``serving/compaction/ask.py``) streams
    with no engine call. The caller holds the session (``SessionManager.using``) until the last
    chunk has gone."""
    check_body(body, options.get("continued", NOTHING_CONTINUED).held)
    if (body.get("n") or 1) > 1:
        raise SessionError("n: a streamed ARC answer has one choice (n=1); ask without stream "
                           "for several, or name no session")
    step = None
    try:
        step = await prepared(ChatStep(body, session, engine, raw_request, **options))  # saves itself if it fails
        usage = step.stream_options  # as vLLM's model read it: an object or None
        include_usage = bool(usage and usage.include_usage)
        if step.ask is not None and step.ask.alone:
            return alone_chunks(await answered_alone(step, body.get("model") or ""), include_usage)
        events = await started(await step.call(stream=True))
    except BaseException:
        if step is not None:  # what was archived is saved
            step.end()
        raise
    return relay(step, events, include_usage, bool(usage and usage.continuous_usage_stats))


async def started(events):
    """The engine's events with the first already read: vLLM refuses some requests only once
    the generation begins (a ``thinking`` budget on a server without a reasoning parser), and
    such a refusal, before anything was streamed, is an HTTP error in the client's API form, as
    one before the engine call is. (The first event comes with the first token either way.)"""
    try:
        first = await events.__anext__()
    except StopAsyncIteration:
        first = None
    for chunk in data_of(first or ""):
        if "error" in chunk:
            await events.aclose()
            error = chunk["error"] if isinstance(chunk["error"], dict) else {"message": str(chunk["error"])}
            raise EngineError({"error": error}, int(error.get("code") or 400))

    async def chained():
        try:
            if first is not None:
                yield first
            async for block in events:
                yield block
        finally:  # a client gone mid-stream: vLLM aborts its request
            await events.aclose()
    return chained()


def last_chunks(base: dict, finish_reason, usage, arc: dict, include_usage: bool) -> list[dict]:
    """How every ARC stream ends: the ``finish_reason`` chunk, then (with ``include_usage``) the
    usage chunk; ``arc`` rides the last of them."""
    final = {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish_reason}]}
    if include_usage:
        return [final, {**base, "choices": [], "usage": usage, "arc": arc}]
    return [{**final, "arc": arc}]


async def alone_chunks(result: dict, include_usage: bool):
    """A compaction answered alone (``chat.answered_alone``) as the chunks of a stream."""
    base = {key: result[key] for key in ("id", "created", "model")}
    base["object"] = "chat.completion.chunk"
    [choice] = result["choices"]
    yield {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]}
    yield {**base, "choices": [{"index": 0, "delta": {"content": choice["message"]["content"]},
                                "finish_reason": None}]}
    for chunk in last_chunks(base, "stop", result["usage"], result["arc"], include_usage):
        yield chunk


def data_of(events: str):
    """The JSON payloads of a block of server-sent events (``[DONE]`` left out)."""
    for line in events.split("\n"):
        if line.startswith("data: ") and line[6:].strip() != "[DONE]":
            yield json.loads(line[6:])


class Generation:
    """One engine generation's output, put together from its deltas (for ``serve_commands``)."""

    def __init__(self):
        self.content = ""
        self.reasoning = ""
        self.calls: dict[int, dict] = {}
        self.finish_reason = None
        self.usage = None

    def add(self, delta: dict) -> None:
        self.content += delta.get("content") or ""
        self.reasoning += delta.get("reasoning") or ""
        for piece in delta.get("tool_calls") or []:
            call = self.calls.setdefault(piece.get("index", 0), {"id": None, "name": "", "arguments": ""})
            call["id"] = piece.get("id") or call["id"]
            function = piece.get("function") or {}
            call["name"] += function.get("name") or ""
            call["arguments"] += function.get("arguments") or ""

    def message(self):
        from vllm.entrypoints.generate.base.protocol import FunctionCall, ToolCall
        from vllm.entrypoints.openai.chat_completion.protocol import ChatMessage

        calls = [ToolCall(id=call["id"] or f"call_{index}", type="function",
                          function=FunctionCall(name=call["name"], arguments=call["arguments"]))
                 for index, call in sorted(self.calls.items())]
        return ChatMessage(role="assistant", content=self.content or None, tool_calls=calls,
                           reasoning=self.reasoning or None)

    def answer(self, reasoning_before: str = "") -> dict:
        """What the client got of this generation, as a chat message (ARC's calls left out);
        ``reasoning_before``: the reasoning of the generations before it, which streamed too."""
        calls = [{"id": call["id"] or f"call_{index}", "function": {"name": call["name"], "arguments": call["arguments"]}}
                 for index, call in sorted(self.calls.items()) if call["name"] not in ARC_TOOL_NAMES]
        return answer_of({"content": self.content, "tool_calls": calls, "reasoning": reasoning_before + self.reasoning})


class Relayed:
    """What a relayed stream keeps across the engine generations of one step: the chunks'
    common fields (the first chunk's), whether the role went out, the client's tool calls
    numbered across generations, the reasoning of the generations whose command was served
    (their deltas streamed), and the step's ``arc`` once it finished."""

    def __init__(self, step: ChatStep, continuous_usage: bool):
        self.step, self.continuous_usage = step, continuous_usage
        self.base: dict | None = None
        self.role_sent, self.engine_failed = False, False
        self.client_calls, self.reasoning = 0, ""
        self.arc: dict | None = None

    async def generation(self, events, held: HeldBack, generation: Generation):
        """The client's chunks of one engine generation, its deltas added to ``generation``
        (ARC's calls held back); an engine error mid-stream is passed on, and ends the stream."""
        async for block in events:
            for chunk in data_of(block):
                if "error" in chunk:
                    self.engine_failed = True
                    yield chunk
                    return
                if self.base is None:
                    self.base = {key: chunk[key] for key in ("id", "object", "created", "model") if key in chunk}
                if chunk.get("usage"):
                    generation.usage = chunk["usage"]
                for choice in chunk.get("choices") or []:
                    delta = choice.get("delta") or {}
                    generation.add(delta)
                    out, logprobs = held.feed(delta, choice.get("logprobs"))
                    if not self.role_sent:  # the first event goes out at once, as plain vLLM's
                        out, self.role_sent = {"role": "assistant", "content": "", **out}, True
                    if choice.get("finish_reason"):
                        generation.finish_reason = choice["finish_reason"]
                    if out:
                        yield self.chunk(out, {"logprobs": logprobs},
                                         chunk.get("usage") if self.continuous_usage else None)

    def went_on(self, held: HeldBack, generation: Generation) -> None:
        """A generation whose ARC command was served: its reasoning reached the client (part of
        its answer), and the next generation numbers the client's calls after its own."""
        self.reasoning += generation.reasoning
        self.client_calls = held.num_client_calls

    def chunk(self, delta: dict, relayed: dict | None = None, usage: dict | None = None) -> dict:
        """A chunk of one delta, with the stream's common fields. ``relayed``: the engine event's
        own choice fields (its ``logprobs``), on a delta relayed from it."""
        choice = {"index": 0, "delta": delta, **(relayed or {}), "finish_reason": None}
        return {**self.base, "choices": [choice], **({"usage": usage} if usage else {})}

    async def ending(self, held: HeldBack, generation: Generation, include_usage: bool):
        """The last generation's end: what was held back, the compaction's appendix, then the
        step finished (committed) before the last chunks say it is done."""
        step = self.step
        if rest := held.finish():
            yield self.chunk(rest)
        if appendix := appended(step.ask):  # the model's summary, then ARC's stubs and handle
            generation.add({"content": appendix})
            step.ask.decoded_tokens = (generation.usage or {}).get("completion_tokens") or 0
            yield self.chunk({"content": appendix})
        finish = generation.finish_reason
        if finish == "tool_calls" and held.num_client_calls == self.client_calls:
            finish = "stop"  # only ARC's calls were made, and the client saw none of them
        self.arc = await step.finish(generation.answer(self.reasoning))
        for chunk in last_chunks(self.base, finish, generation.usage, self.arc, include_usage):
            yield chunk


def stream_error(error: Exception) -> dict:
    """An error after the first event (the status is sent): reported in the stream."""
    if isinstance(error, EngineError):
        return error.body
    if isinstance(error, SessionError):  # the store unreachable at the end, say: its status
        return openai_error(str(error), error.status, "store_error" if error.status >= 500 else "invalid_request_error")
    return openai_error(f"ARC stream failed: {error}", 500, "internal_error")


async def relay(step: ChatStep, events, include_usage: bool, continuous_usage: bool = False):
    """The client's stream of one step: each engine generation relayed with ARC's calls held
    back; a generation that called an ARC command is served and the model goes on."""
    relayed = Relayed(step, continuous_usage)
    try:
        while True:
            held = HeldBack(commands=step.may_serve, first_client_index=relayed.client_calls)
            generation = Generation()
            async for chunk in relayed.generation(events, held, generation):
                yield chunk
            if relayed.engine_failed:
                return
            step.count_usage(generation.usage)
            if not step.serve(generation.message()):
                break
            relayed.went_on(held, generation)
            events = await step.call(stream=True)
        async for chunk in relayed.ending(held, generation, include_usage):
            yield chunk
    except Exception as error:
        yield stream_error(error)
    finally:
        if hasattr(events, "aclose"):  # a client gone mid-stream: vLLM aborts its request
            await events.aclose()
        if relayed.arc is None:
            step.end()
