"""Who is asking, and which conversation a request continues, from what clients already send.

One owner for these wire keys (as ``kv/extra_args.py`` is for ARC's own request fields):

    caller          the ``Authorization`` or ``x-api-key`` value (the OpenAI and the Anthropic
                    SDKs send the key in one or the other), with the body's ``user`` and
                    ``safety_identifier``: two callers never share a session, whatever they send
    conversation    the client's own id for its conversation, the first found of:
      every API       body ``session_id``, header ``X-Session-ID``, ``vllm_xargs.session_id``
                      (vLLM's own "stable session identity shared by related requests")
      messages        header ``X-Claude-Code-Session-Id``; ``metadata.user_id`` (Claude Code
                      sends a JSON object there whose ``session_id`` is the same id)
      responses       body ``prompt_cache_key`` (Codex: its thread id); header ``session-id``

(A chat completions client's ``prompt_cache_key`` is a cache-routing hint an application may
share across its conversations, so it keys no conversation there.)

A request with a conversation id continues the session of that id (and caller), also when
the client rewrote its history (``serving/sessions.py``); one without falls back to the
fingerprints of its messages (``serving/conversation_index.py``). ``user`` and
``safety_identifier`` name a person, not a conversation: one person's two conversations must
not share a session, so they scope the caller and never key a conversation.

Pure Python; run ``python -m arc_vllm.serving.conversation_keys`` for an example.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import dataclass

from arc_vllm.serving.sessions import SessionError

CHAT, MESSAGES, RESPONSES = "chat", "messages", "responses"  # the APIs, as metrics label them

# (where, name): "header" names are lower case; "body" a top-level field; "xargs" vllm_xargs.
EVERY_API = (("body", "session_id"), ("header", "x-session-id"), ("xargs", "session_id"))
CONVERSATION_KEYS = {
    CHAT: EVERY_API,
    MESSAGES: EVERY_API + (("header", "x-claude-code-session-id"), ("metadata", "user_id")),
    RESPONSES: EVERY_API + (("body", "prompt_cache_key"), ("header", "session-id")),
}
MAX_KEY_CHARS = 512  # a longer value is not an id a client meant as one


def headers_of(scope) -> dict[str, str]:
    """An ASGI request's headers, lower-case names (latin-1, as HTTP defines them)."""
    return {name.decode("latin-1").lower(): value.decode("latin-1")
            for name, value in scope.get("headers") or []}


def caller_of(headers: dict[str, str], body) -> str:
    """Who is asking: the API key (any Authorization or x-api-key value) and the body's
    ``user`` and ``safety_identifier``."""
    body = body if isinstance(body, dict) else {}
    key = headers.get("authorization") or headers.get("x-api-key") or ""
    user, safety = (body.get(name) if isinstance(body.get(name), str) else ""
                    for name in ("user", "safety_identifier"))
    # Without a safety_identifier the hash is the one durable sessions were stored under.
    parts = [key, user] + ([safety] if safety else [])
    return hashlib.sha1("\x1f".join(parts).encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class Who:
    """Who a request is: ``caller`` (``caller_of``: the key, and the body's ``user`` /
    ``safety_identifier``, the client's own assertion) scopes its implicit sessions; ``tenant``
    (the key alone) owns the sessions it makes: under ``--api-key``, where keys are checked,
    only it continues and reads them; ``admin`` (``--arc-admin-key``) reads every session."""

    caller: str
    tenant: str
    admin: bool = False


def key_of(headers: dict[str, str]) -> str:
    """The API key a request carries: ``Authorization: Bearer K`` or ``x-api-key: K``, as K."""
    value = headers.get("authorization") or headers.get("x-api-key") or ""
    scheme, _, token = value.partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else value


def who_of(headers: dict[str, str], body, admin_key: str | None = None) -> Who:
    key = key_of(headers)
    tenant = hashlib.sha1(f"tenant\x1f{key}".encode("utf-8", "surrogatepass")).hexdigest()
    admin = bool(admin_key) and hmac.compare_digest(key.encode("utf-8", "surrogatepass"),
                                                    admin_key.encode("utf-8", "surrogatepass"))
    return Who(caller_of(headers, body), tenant, admin)


def conversation_of(api: str, headers: dict[str, str], body) -> str | None:
    """The client's own id for the conversation this request belongs to (None: it sends none)."""
    body = body if isinstance(body, dict) else {}
    for where, name in CONVERSATION_KEYS[api]:
        if where == "header":
            value = headers.get(name)
        elif where == "body":
            value = body.get(name)
        elif where == "xargs":
            xargs = body.get("vllm_xargs")
            value = xargs.get(name) if isinstance(xargs, dict) else None
        else:  # Anthropic metadata.user_id: Claude Code's JSON with a session_id, or an opaque id
            metadata = body.get("metadata")
            value = metadata.get(name) if isinstance(metadata, dict) else None
            value = session_in_user_id(value) if isinstance(value, str) else None
        if isinstance(value, str) and value.strip() and len(value) <= MAX_KEY_CHARS:
            if not is_text(value):  # it is stored and listed: text that cannot be written is refused
                raise SessionError(f"{name}: not valid text (a lone surrogate); a conversation id must be "
                                   "encodable as UTF-8")
            return value  # the same id whichever key carries it (Claude Code sends two)
    return None


def is_text(value: str) -> bool:
    """Whether ``value`` can be written as UTF-8 (JSON from a client may hold lone surrogates)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def session_in_user_id(user_id: str) -> str | None:
    """Claude Code's ``metadata.user_id`` is JSON holding its ``session_id``; any other value
    names a user, not a conversation."""
    try:
        value = json.loads(user_id)
    except ValueError:
        return None
    session = value.get("session_id") if isinstance(value, dict) else None
    return session if isinstance(session, str) else None


if __name__ == "__main__":
    headers = {"x-api-key": "k", "x-claude-code-session-id": "17557aab"}
    print(caller_of(headers, {}), conversation_of(MESSAGES, headers, {}))
    print(conversation_of(RESPONSES, {}, {"prompt_cache_key": "thread-1"}))
