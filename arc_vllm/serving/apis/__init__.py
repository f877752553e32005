"""ARC on every conversational API vLLM serves: one ARC path, a thin adapter per API.

    chat       POST /v1/chat/completions      ``apis/chat.py``       (the ARC path's own form)
    messages   POST /v1/messages              ``apis/messages.py``   (Anthropic; Claude Code)
               POST /v1/messages/count_tokens
    responses  POST /v1/responses             ``apis/responses.py``  (OpenAI; Codex CLI,
                                                                      openai-agents)

Each adapter translates its API's request into a chat completion body, with vLLM's own
converters where vLLM has them (so that, until ARC acts, the engine gets the prompt plain vLLM
would build for that API), and ARC's answer (a chat completion, or its stream of chunks) back
into the API's own form; everything between (sessions, compaction, the view, the recall loop,
streaming hold-back) is ``serving/step/chat.py`` and ``serving/step/stream.py``, once. The route in
front of vLLM's own (``serving/api_route.py``) finds the session: one the request names, one
its API continues by reference (``previous_response_id``), the client's own conversation id
(``serving/sessions/conversation_keys.py``), or its conversation's fingerprints.

    class MessagesAPI(ConversationAPI): name = "messages"; paths = ("/v1/messages",) ...

May import: ``step``, ``compaction``, ``sessions``, ``arc_vllm.core``, the base modules and the
serving leaves; nothing of the routes above it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, AsyncIterator

from fastapi.responses import JSONResponse

from arc_vllm.serving.errors import SessionError, openai_error


@dataclass
class Translation:
    """One request in the ARC path's form, and what its adapter needs to answer it."""

    chat: dict                       # the chat completion body ARC runs
    request: Any = None              # the API's own parsed request
    session: str | None = None       # the session the API's own reference names (previous_response_id)
    extra: dict = field(default_factory=dict)
    handle: Any = None               # the compaction handle the request carries (an item, a block)
    ask: Any = None                  # the compaction it asks for (``serving/compaction/ask.py``)


class ConversationAPI:
    """An API's adapter. ``translate`` raises ``SessionError`` (a 4xx in the API's error form)
    for a bad body and ``Declined`` for a request plain vLLM should serve."""

    name: str
    paths: tuple[str, ...]
    reads = False  # a read-only route (``read``) rather than a conversation step

    def declines(self, body: dict) -> None:
        """Raises ``Declined`` for a request ARC leaves to vLLM when it names no session."""

    def carries_handle(self, body: dict) -> bool:
        """Whether the body holds a compaction handle (which names its session)."""
        return False

    async def translate(self, body: dict, app, caller: str = "", size: int = 0) -> Translation:
        """``caller``: who asks (``ownership.Who.caller``, computed once by the route: the scope of
        what the adapter keeps of conversations); ``size``: the body's length in bytes (what
        keeping its items weighs, ``translated.py``)."""
        raise NotImplementedError

    def bind(self, translation: Translation, session) -> None:
        """The request's session is known (and held): what the translation needs of it."""

    def answer(self, translation: Translation, response: dict, app) -> dict:
        """The API's answer from ARC's chat completion (``response["arc"]`` is ARC's figures)."""
        raise NotImplementedError

    def stream(self, translation: Translation, chunks: AsyncIterator[dict], app) -> AsyncIterator[str]:
        """The API's events from ARC's stream of chat completion chunks (objects: the adapter
        is the one layer that writes event text)."""
        raise NotImplementedError

    async def read(self, body: dict, app, session) -> dict:
        """A read-only route's answer (``reads``); ``session`` is the one named, or None."""
        raise NotImplementedError

    def error(self, message: str, status: int, kind: str = "invalid_request_error") -> JSONResponse:
        return JSONResponse(openai_error(message, status, kind), status)


def check_results(messages: list[dict], result: str, call: str) -> None:
    """Every tool result answers a call made before it, once, as the Anthropic and OpenAI APIs
    require (``result``/``call``: what the API calls them, for the message); a 400 naming the
    id otherwise. vLLM passes such a result on; ARC would archive it under a call it invents."""
    called, answered = set(), set()
    for message in messages:
        for tool_call in message.get("tool_calls") or [] if message.get("role") == "assistant" else []:
            called.add(tool_call.get("id"))
        if message.get("role") != "tool":
            continue
        id = message.get("tool_call_id")
        if id not in called:
            raise SessionError(f"{result} for {call} {id!r}: no {call} of that id comes before it in the "
                               "conversation")
        if id in answered:
            raise SessionError(f"{result} for {call} {id!r}: that call already has a result")
        answered.add(id)


MAX_JSON_DEPTH = 100  # no API body nests near this (tool schemas included); deeper is an attack


def json_body(raw: bytes):
    """A request body as JSON (None: not JSON). A ``SessionError`` (400) for one nested deeper
    than ``MAX_JSON_DEPTH``: Python's parser and every walker after it recurse, and a body
    10,000 levels deep would otherwise surface as a 500."""
    try:
        body = json.loads(raw)
    except RecursionError:
        raise SessionError(f"body: JSON nested deeper than {MAX_JSON_DEPTH} levels") from None
    except (ValueError, UnicodeDecodeError):
        return None
    # One level at a time, over the containers alone (a list comprehension per container: a
    # resent conversation of 5 MB is walked in a few milliseconds).
    level, depth = [body] if type(body) is dict or type(body) is list else [], 1
    while level:
        if depth > MAX_JSON_DEPTH:
            raise SessionError(f"body: JSON nested deeper than {MAX_JSON_DEPTH} levels")
        deeper = []
        for value in level:
            deeper += [child for child in (value.values() if type(value) is dict else value)
                       if type(child) is dict or type(child) is list]
        level, depth = deeper, depth + 1
    return body


