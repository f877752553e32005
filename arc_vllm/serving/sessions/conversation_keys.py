"""Who is asking, and which conversation a request continues, from what clients already send.

One owner for these wire keys (as ``kv/extra_args.py`` is for ARC's own request fields):

    session         the ARC session a request names: ``vllm_xargs.arc_session``, else the
                    ``X-ARC-Session`` header (``session_named``); a Responses request's
                    ``previous_response_id`` when ARC gave it (``ARC_RESPONSE``: the id carries
                    the session)
    caller          the ``Authorization`` or ``x-api-key`` value (the OpenAI and the Anthropic
                    SDKs send the key in one or the other), with the end user the body asserts
                    (``user``, ``safety_identifier``; Anthropic's ``metadata.user_id`` where it
                    is not Claude Code's JSON) and, behind a gateway, the caller its header
                    names: two callers never share a session, whatever they send
    conversation    the client's own id for its conversation, the first found of:
      every API       body ``session_id``, header ``X-Session-ID``, ``vllm_xargs.session_id``
                      (vLLM's own "stable session identity shared by related requests")
      messages        header ``X-Claude-Code-Session-Id``; ``metadata.user_id`` (Claude Code
                      sends a JSON object there whose ``session_id`` is the same id)
      responses       body ``prompt_cache_key`` (Codex: its thread id); header ``session-id``

(A chat completions client's ``prompt_cache_key`` is a cache-routing hint an application may
share across its conversations, so it keys no conversation there.)

A request with a conversation id continues the session of that id (and caller), also when
the client rewrote its history (``serving/sessions/session.py``); one without falls back to the
fingerprints of its messages (``serving/sessions/conversation_index.py``). ``user`` and
``safety_identifier`` name a person, not a conversation: one person's two conversations must
not share a session, so they scope the caller and never key a conversation (nor does a
plain ``metadata.user_id``). Every such
identifier is text of at most ``MAX_KEY_CHARS`` characters, or the request is a 400 before
anything is stored (``checked_id``). Whose sessions these are is ``serving/sessions/ownership.py``'s.

A request's routing key (``conversation_index.routing_key``: the Ray front's) is made of these
keys too: the session named, else the caller's conversation id, else its start.

Pure Python; run ``python -m arc_vllm.serving.sessions.conversation_keys`` for an example.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets

from arc_vllm.kv.extra_args import session_of_body
from arc_vllm.serving.metrics import CHAT, MESSAGES, RESPONSES
from arc_vllm.serving.errors import SessionError


# (where, name): "header" names are lower case; "body" a top-level field; "xargs" vllm_xargs.
EVERY_API = (("body", "session_id"), ("header", "x-session-id"), ("xargs", "session_id"))
CONVERSATION_KEYS = {
    CHAT: EVERY_API,
    MESSAGES: EVERY_API + (("header", "x-claude-code-session-id"), ("metadata", "user_id")),
    RESPONSES: EVERY_API + (("body", "prompt_cache_key"), ("header", "session-id")),
}
MAX_KEY_CHARS = 512  # the longest identifier taken (a conversation id, a user, a caller)
SESSION_HEADER = "x-arc-session"
# A response id ARC gave (``arc_response_id``): ``resp_{session}_{request}_{random}``.
ARC_RESPONSE = re.compile(r"^resp_(sess_[0-9a-f]+)_([0-9]+)_[0-9a-f]+$")


def arc_response_id(session_id: str, request: int) -> str:
    """The id of a Responses answer ARC gives for the ``request``-th request of a session:
    a later ``previous_response_id`` names the session and the answer (``ARC_RESPONSE``)."""
    return f"resp_{session_id}_{request}_{secrets.token_hex(8)}"


def session_named(header: str | None, body) -> str | None:
    """The session a request names: ``vllm_xargs.arc_session``, else ``X-ARC-Session``."""
    named = session_of_body(body)
    return named if named is not None else header


def headers_of(scope) -> dict[str, str]:
    """An ASGI request's headers, lower-case names (latin-1, as HTTP defines them)."""
    return {name.decode("latin-1").lower(): value.decode("latin-1")
            for name, value in scope.get("headers") or []}


def caller_of(headers: dict[str, str], body, gateway: str | None = None) -> str:
    """Who is asking, as implicit sessions are scoped: the API key (any Authorization or
    x-api-key value), the end user the body asserts (``end_user_of``), and, behind a gateway
    (``--arc-caller-header``), the caller it names."""
    key = headers.get("authorization") or headers.get("x-api-key") or ""
    user, safety, metadata_user = end_user_of(body)
    # Without a safety_identifier, a metadata user or a gateway the hash is the one durable
    # sessions were stored under.
    parts = ([key, user] + ([safety] if safety else []) + (["metadata", metadata_user] if metadata_user else [])
             + (["gateway", gateway] if gateway is not None else []))
    return hashlib.sha1("\x1f".join(parts).encode("utf-8", "surrogatepass")).hexdigest()


USER_FIELDS = ("user", "safety_identifier")  # the client's assertion of who its end user is


def end_user_of(body) -> tuple[str, str, str]:
    """The end user a body asserts: its ``user``, its ``safety_identifier`` and (the Anthropic
    API's field for it) ``metadata.user_id``, unless that is Claude Code's JSON, which names a
    conversation (``session_in_user_id``); "" where absent."""
    body = body if isinstance(body, dict) else {}
    user, safety = (body.get(name) if isinstance(body.get(name), str) else "" for name in USER_FIELDS)
    metadata = body.get("metadata")
    metadata_user = metadata.get("user_id") if isinstance(metadata, dict) else None
    if not isinstance(metadata_user, str) or session_in_user_id(metadata_user) is not None:
        metadata_user = ""
    return user, safety, metadata_user


def key_of(headers: dict[str, str]) -> str:
    """The API key a request carries: ``Authorization: Bearer K`` or ``x-api-key: K``, as K."""
    value = headers.get("authorization") or headers.get("x-api-key") or ""
    scheme, _, token = value.partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else value


def check_identifiers(body) -> None:
    """The end user a body asserts scopes and owns sessions: text that cannot be written, or
    longer than ``MAX_KEY_CHARS``, is a 400 before anything is stored."""
    for name, value in zip((*USER_FIELDS, "metadata.user_id"), end_user_of(body)):
        checked_id(name, value)


def checked_id(name: str, value: str) -> str:
    """``value``, an identifier a client sent as ``name``, if it can be stored; else a 400."""
    if len(value) > MAX_KEY_CHARS:
        raise SessionError(f"{name}: {len(value)} characters; an identifier has at most {MAX_KEY_CHARS}")
    if not is_text(value):  # it is stored and listed: text that cannot be written is refused
        raise SessionError(f"{name}: not valid text (a lone surrogate); an identifier must be "
                           "encodable as UTF-8")
    return value


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
        if isinstance(value, str) and value.strip():
            return checked_id(name, value)  # the same id whichever key carries it (Claude Code sends two)
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
