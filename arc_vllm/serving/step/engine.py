"""The engine an ARC step calls: vLLM's chat handler (``OpenAIServingChat``), the KV warm-up
that runs before each call with ``--arc-kv-reuse`` (``serving/step/kv_warmup.py``), and vLLM's chat
request model (``ChatCompletionRequest``). Built once per API server, in the plugin's
``init_state`` (``app.state.arc_engine``); every step of every API uses that one.

    engine.request(fields)          vLLM's request model of a chat body's fields, its errors a
                                    ``SessionError`` (400) naming each field as the client does
    engine.check(body, first_new)   the same over a body whose first ``first_new`` messages were
                                    checked before, and the sampling parameters vLLM would make;
                                    text the tokenizer cannot take (a lone surrogate, also one
                                    the template writes out of a tool call's arguments) is a 400
    tools_of(request)               its tools as vLLM hands them to the chat template
    await engine.create(request, raw_request)   the chat handler's answer (or event generator)
    await engine.refused_model(model)   vLLM's own 404 for a model it does not serve, or None

A step builds its engine request once (``serving/step/chat.py``) and copies it for each engine call
with the call's messages and room (pydantic's ``model_copy``: nothing is validated twice).
``ChatEngine()`` alone (no handler) checks and counts: ``POST /v1/messages/count_tokens`` and
tests use it that way (``tests/test_serving_chat.py`` runs steps over one with a stand-in handler).
"""

from __future__ import annotations

import json

from arc_vllm.serving.errors import EngineError, SessionError, parsed


class ChatEngine:
    def __init__(self, serving=None, kv_warmup=None):
        from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest

        self.serving = serving      # vLLM's chat handler; None: no engine calls (a count, a test)
        self.kv_warmup = kv_warmup  # ``KVWarmup`` with --arc-kv-reuse, else None
        self.request_class = ChatCompletionRequest

    @property
    def window(self) -> int | None:
        """The server's window (vLLM's ``max_model_len``); None without a handler."""
        return getattr(getattr(self.serving, "model_config", None), "max_model_len", None)

    def request(self, fields: dict, first_message: int = 0):
        """vLLM's request model of ``fields``; its validation errors as a ``SessionError``
        naming each field (``messages[2].content``), the alternatives of a union told once.
        ``first_message``: the index the first of ``fields["messages"]`` has in the client's."""
        return parsed(self.request_class, fields, first_message)

    def check(self, fields: dict, first_new: int, asked: int | None):
        """vLLM's request of a chat body's ``fields`` (whose ``messages`` are those from
        ``first_new`` on: the ones before were checked when they were new), then the sampling
        parameters vLLM would make of it for ``asked`` tokens (``temperature`` 3 is refused
        there), so that a request vLLM would refuse stores nothing. Returns the request."""
        from vllm.exceptions import VLLMClientError

        request = self.request(fields, first_new)
        # Text the tokenizer cannot take (a lone surrogate: JSON may carry one, Python keeps it)
        # is refused here, as vLLM refuses it, before the session takes anything in: found as a
        # TypeError while archiving, it once left an implicit session behind and a named one changed.
        places = [(f"messages[{first_new + index}]", message)  # numbered as the client numbers them
                  for index, message in enumerate(as_rendered(fields.get("messages")) or [])]
        where = next((where for path, value in places + [("tools", fields.get("tools"))]
                      if (where := not_text_at(value, path)) is not None), None)
        if where is not None:
            raise SessionError(f"{where}: not valid text (a lone surrogate); text must be encodable as UTF-8")
        try:  # the room vLLM would grant is not known yet: the asked (0 is refused here), or any
            request.to_sampling_params(asked if asked is not None else 2 ** 20, getattr(self.serving, "default_sampling_params", None) or {})
        except (ValueError, TypeError, VLLMClientError) as error:
            raise SessionError(str(error)) from None
        return request

    async def refused_model(self, model) -> EngineError | None:
        """vLLM's own answer (an ``EngineError``, 404) for a ``model`` it does not serve, asked
        of its handler (LoRA adapters and ``VLLM_SKIP_MODEL_NAME_VALIDATION`` as vLLM has them),
        so that a request naming another model is refused before ARC routes or stores anything.
        None: served, no handler, or not a string (the request's validation names that)."""
        if self.serving is None or not isinstance(model, str):
            return None
        error = await self.serving._check_model(self.request_class.model_construct(model=model))
        if error is None:
            return None
        dumped = error.model_dump()
        return EngineError({"error": dumped.get("error", dumped)}, getattr(error.error, "code", 404) or 404)

    async def create(self, request, raw_request):
        """vLLM's chat handler's answer: a response, an event generator, or an error response.
        A client error vLLM raises rather than returns (a ``thinking`` budget on a server without
        a reasoning parser) is made the error response vLLM makes of it, so the client gets it
        in its own API's form (``errors.ErrorForms``), as plain vLLM's Messages route gives it."""
        from vllm.entrypoints.serve.exception_handling.error_response import create_error_response
        from vllm.exceptions import VLLMClientError

        try:
            return await self.serving.create_chat_completion(request, raw_request)
        except VLLMClientError as error:
            return create_error_response(error)


def tools_of(request) -> list[dict] | None:
    """A request's tools exactly as vLLM hands them to the chat template, so ARC counts the
    prompt the engine gets (None: no tools)."""
    return [tool.model_dump() for tool in request.tools] if request.tools else None


def as_rendered(messages):
    """``messages`` as the chat template sees them: vLLM parses each tool call's ``arguments``
    into an object, which the template writes without escaping (transformers' ``tojson``), so a
    lone surrogate escaped in the JSON text (``"\\ud800"``) reaches the tokenizer all the same."""
    if not isinstance(messages, list):
        return messages
    rendered = []
    for message in messages:
        calls = message.get("tool_calls") if isinstance(message, dict) else None
        if isinstance(calls, list):
            parsed_calls = []
            for call in calls:
                function = call.get("function") if isinstance(call, dict) else None
                arguments = function.get("arguments") if isinstance(function, dict) else None
                if isinstance(arguments, str):
                    try:
                        call = dict(call, function=dict(function, arguments=json.loads(arguments)))
                    except ValueError:  # not JSON: the template writes the text as it is
                        pass
                parsed_calls.append(call)
            message = dict(message, tool_calls=parsed_calls)
        rendered.append(message)
    return rendered


def not_text_at(value, path: str = "") -> str | None:
    """Where in ``value`` (objects, lists, strings; keys too) a string cannot be written as
    UTF-8, as ``messages[1].content``; None where all can (one C-speed dump answers that)."""
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
        return None
    except UnicodeEncodeError:
        pass
    if isinstance(value, str):
        return path or "body"
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        if isinstance(key, str) and not_text_at(key) is not None:
            return f"{path or 'body'} (one of its keys)"  # never the key itself: it cannot be written
        place = f"{path}[{key}]" if isinstance(key, int) else (f"{path}.{key}" if path else str(key))
        found = not_text_at(item, place)
        if found is not None:
            return found
    return path or "body"
