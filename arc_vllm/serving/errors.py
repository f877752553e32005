"""Every error the serving package raises, each with the HTTP status it answers with, and the one
place they become responses in each API's own form.

    SessionError(message, status=400)   a request ARC cannot serve as sent: a bad body, an
                                        unknown (404) or ended (410) session, a caller not
                                        allowed (401); raised anywhere, answered once
    SessionBusy(message)                another process held the session past the wait (409)
    LeaseLost(message)                  this replica's hold on a session expired and another
                                        served it since: its writes are refused (409)
    StoreUnavailable(message)           the session store did not answer in time, or refused:
                                        nothing of the request was stored (503)
    EngineError(body, status)           vLLM refused the engine request; its body and status
    Declined                            not an error: a request ARC leaves to plain vLLM (content
                                        it cannot archive), served exactly as without ``--arc``
    ClientGone                          not an error: the client disconnected, its request was
                                        cancelled, and nothing is answered

``ErrorForms`` is the app's exception handlers: each error in the form of the API whose route
the request came to (OpenAI's ``{"error": {...}}`` for chat completions, Responses and the
session routes, written by ``openai_error``; Anthropic's for Messages, by its adapter).
``validation_message`` writes a request model's validation errors one way on every API
(``messages[2].content: ...``), and ``parsed`` is the one place a vLLM request model's refusal
becomes a ``SessionError``: pydantic's errors, and vLLM's own checks that run inside the model
(``VLLMValidationError``: ``top_logprobs`` not a number, or without ``logprobs``), which pydantic
does not wrap and which once escaped after ARC had opened an implicit session. A leaf module:
everything in ``serving/`` may import it.
"""

from __future__ import annotations

import json

MAX_PROBLEMS = 3  # validation problems named in one message


class SessionError(ValueError):
    """A request ARC cannot serve as sent: ``status`` is the HTTP status to answer with."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


class StoreUnavailable(SessionError):
    """The session store (Redis, say) did not answer in time or refused; nothing was stored."""

    def __init__(self, message: str):
        super().__init__(message, 503)


class LeaseLost(SessionError):
    """A replica's hold on a session expired and another served it: its writes are refused."""

    def __init__(self, message: str):
        super().__init__(message, 409)


class SessionBusy(TimeoutError):
    """Another process held the session for longer than the wait allowed."""

    status = 409


class EngineError(RuntimeError):
    """vLLM answered with an error that ARC cannot act on; passed to the client as is."""

    def __init__(self, body: dict, status: int):
        super().__init__(json.dumps(body)[:300])
        self.body = body
        self.status = status


class Declined(Exception):
    """A request ARC does not take (content it cannot archive, several choices): with no
    session named, plain vLLM serves it exactly as without ``--arc``."""


def openai_error(message: str, status: int, kind: str = "invalid_request_error") -> dict:
    """OpenAI's error body (chat completions', Responses', the session routes', the Ray front's,
    and a stream's error event): the one place it is written."""
    return {"error": {"message": message, "type": kind, "code": status}}


def item_path(loc, first_item: int) -> list:
    """A validation error's location (pydantic's ``loc``), its item index as the client numbers
    its items, where only those from ``first_item`` on were validated."""
    loc = list(loc)
    if loc[:1] in (["messages"], ["input"]) and len(loc) > 1 and isinstance(loc[1], int):
        loc[1] += first_item
    return loc


def parsed(model, body: dict, first_item: int = 0):
    """``body`` as vLLM's request ``model``; a ``SessionError`` (400) naming the first problems,
    before anything is routed or stored. ``first_item``: the index the first of the body's
    ``messages`` (``input``) has in the client's request (an adapter validates only the items it
    has not seen)."""
    from pydantic import ValidationError
    from vllm.exceptions import VLLMClientError

    try:
        return model.model_validate(body)
    except ValidationError as error:
        raise SessionError(validation_message(error.errors(), first_item)) from None
    except VLLMClientError as error:  # raised by the model's own validators, unwrapped
        raise SessionError(str(error)) from None


def validation_message(errors: list[dict], first_item: int = 0) -> str:
    """A request model's validation errors (pydantic's ``errors()``) as one message, the same on
    every API: each field named as the client writes it (``messages[2].content``, its index as
    the client numbers its items), the alternatives of a union told once, the first few."""
    problems = {}
    for problem in errors:
        loc = [part for part in problem["loc"] if not union_member(part)]
        path = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in item_path(loc, first_item))
        problems.setdefault(path.lstrip(".") or "body", problem["msg"])
    # A union's alternative that failed at the top (``input`` as a string) says less than the
    # one that failed deeper (``input[2].content``): the deeper stands for both.
    deepest = [path for path in problems
               if not any(other != path and other.startswith((path + ".", path + "[")) for other in problems)]
    return "; ".join(f"{path}: {problems[path]}" for path in deepest[:MAX_PROBLEMS])


def union_member(part) -> bool:
    """Whether a validation location's part names a union's alternative (pydantic's tags: a
    model's class name, ``str``, ``list[...]``, ``function-after[...]``), not a field."""
    return isinstance(part, str) and (part[:1].isupper() or "[" in part or part in PYTHON_TYPES)


PYTHON_TYPES = frozenset({"str", "int", "float", "bool", "dict", "list", "none", "bytes"})


class ClientGone(Exception):
    """The client disconnected before its answer was ready: its request was cancelled, and
    nothing is sent (``api_route.cancelled_on_disconnect``)."""


class ErrorForms:
    """The app's one mapping of ARC's errors to responses, in the error form of the API whose
    route a request came to (``apis``: each with its ``paths`` and ``error(message, status,
    kind)``; ``default``: the session routes' and chat completions', OpenAI's)."""

    def __init__(self, apis: list, default):
        self.by_path = {path: api for api in apis for path in api.paths}
        self.default = default

    def api_of(self, request):
        return self.by_path.get(request.url.path, self.default)

    def session_error(self, request, exc: SessionError):
        return self.api_of(request).error(str(exc), exc.status)

    def busy(self, request, exc: SessionBusy):
        return self.api_of(request).error(str(exc), SessionBusy.status, "conflict")

    def engine_error(self, request, exc: EngineError):
        """vLLM refused the engine request: its message and status, in the client's form."""
        error = exc.body.get("error") if isinstance(exc.body.get("error"), dict) else {}
        return self.api_of(request).error(str(error.get("message") or exc.body), exc.status,
                                          str(error.get("type") or "invalid_request_error"))

    def install(self, app) -> None:
        app.add_exception_handler(SessionError, self.session_error)
        app.add_exception_handler(SessionBusy, self.busy)
        app.add_exception_handler(EngineError, self.engine_error)

