"""Implicit sessions: a request that names no session gets one by its conversation.

Clients of an OpenAI- or Anthropic-compatible server resend the whole conversation on every
request, so a conversation is recognised by the fingerprints of its messages
(``core/transcript.py`` ``fingerprint``, the same that tell a session which messages are
new), within a scope: the caller (``serving/sessions/conversation_keys.py``: the API key, ``user``),
and, where the client names its conversation itself (Claude Code's session id, Codex's
``prompt_cache_key``), that id too. Two callers never share a session, whatever they send.

``ConversationIndex`` maps (scope, the fingerprints of a session's conversation so far) to
that session. A request continues the session whose recorded conversation its messages
extend, the longest one if several do. Otherwise:

- in a scope with the client's own id, the session of that id whose conversation starts with
  the same first message continues too: the client rewrote its history (Claude Code's own
  ``/compact``, an edit), and the session takes the new history in with everything it stored
  still recallable (``Session.take_in``). A different first message under the same id is
  another conversation of that client (a side request with its own system prompt): a session
  of its own;
- in a scope of fingerprints alone it starts a new session (a new conversation, or one whose
  history diverges from every session's), in which what earlier sessions stored is not
  recallable.

Keys are chained hashes, so finding the longest match is one pass over the request's messages.
A session is indexed at its conversation as the last request left it, and, while a request of
it is in flight, at that request's conversation too (``hold``, until ``release``): a second
request of the conversation that arrives before the first has finished (20 at once, or the
next step sent the moment the client dropped the last one's stream) finds the session the first
was routed to, instead of starting another.

The index holds at most ``max_sessions`` sessions, the least recently remembered forgotten
first: a durable session stays indexed when it is unloaded (its conversation reloads it), so
without the bound a server with a store folder would grow by one entry per conversation for
good. A forgotten session is still there by its id; only a conversation that names none
starts a new one. Processes that share a store folder share the index too, one small file per
conversation start (``state``/``from_state``; ``SessionManager.for_conversation``).

A front over several servers (the Ray front, ``serving/ray/front.py``) keeps a conversation on
one server by ``routing_key``, from the same keys.

Run ``python -m arc_vllm.serving.sessions.conversation_index`` for an example.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict

from arc_vllm.core.transcript import fingerprint
from arc_vllm.serving.errors import SessionError
from arc_vllm.serving.metrics import RESPONSES
from arc_vllm.serving.sessions.conversation_keys import (ARC_RESPONSE, SESSION_HEADER, caller_of, conversation_of,
                                                         session_named)


MAX_INDEXED = 65536  # sessions found by their conversation, the most recently used


def client_scope(caller: str, conversation: str | None) -> str:
    """The index scope of a request: its caller, and the client's own conversation id if any."""
    if conversation is None:
        return caller
    return hashlib.sha1(f"{caller}\x1fconversation\x1f{conversation}".encode("utf-8", "surrogatepass")).hexdigest()


def chain(scope: str, prints: list[str]) -> list[str]:
    """The key of every prefix of a conversation: ``keys[k - 1]`` is its first k messages'."""
    keys, key = [], scope
    for print_ in prints:
        key = hashlib.sha1(f"{key}\x1f{print_}".encode()).hexdigest()
        keys.append(key)
    return keys


def routing_key(api: str | None, headers: dict[str, str], body) -> str | None:
    """The key every request of one session or conversation shares, for a front that assigns
    them to one server (``serving/ray/front.py``), from the keys above: the session named (or
    that ARC's ``previous_response_id`` names), else, for a conversational API (``api``), the
    client's own conversation id or the conversation's start (its system text and first
    message, Anthropic's moving ``cache_control`` marks left out), with the caller. (A
    server's implicit index matches whole translated conversations (``ConversationIndex``);
    a front needs only that one conversation's requests share a key. None: no key.)"""
    header = headers.get(SESSION_HEADER)
    sid = session_named(header, body)
    if isinstance(sid, str):
        return sid
    if header is not None or not isinstance(body, dict):
        return header
    previous = ARC_RESPONSE.match(str(body.get("previous_response_id") or ""))
    if previous:
        return previous.group(1)
    if api is None:
        return None
    caller = caller_of(headers, body)
    try:
        conversation = conversation_of(api, headers, body)
    except SessionError:  # an id that cannot be stored: any server answers the 400
        return None
    if conversation is not None:
        return "conversation-" + client_scope(caller, conversation)
    items = body.get("messages") if api != RESPONSES else body.get("input")
    items = [items] if isinstance(items, str) else items
    if isinstance(items, list) and items and isinstance(items[0], (dict, str)):
        start = without_cache_control([body.get("system") or body.get("instructions"), items[0]])
        return "conversation-" + chain(caller, [fingerprint({"start": start})])[0]
    return None


def without_cache_control(value):
    """An Anthropic message or system with its ``cache_control`` marks left out: Claude Code
    moves them from turn to turn, so a conversation's first message keeps one key."""
    if isinstance(value, list):
        return [without_cache_control(item) for item in value]
    if isinstance(value, dict):
        return {key: without_cache_control(item) for key, item in value.items() if key != "cache_control"}
    return value


class ConversationIndex:
    def __init__(self, max_sessions: int = MAX_INDEXED):
        self.max_sessions = max_sessions
        self.sessions: dict[str, str] = {}  # key of a conversation so far -> session id
        # session id -> (its current key, its start key), least recently remembered first
        self.keys: OrderedDict[str, tuple[str, str]] = OrderedDict()
        self.starts: dict[str, str] = {}  # key of a conversation's first message -> session id
        # key of an in-flight request's conversation -> [session id, requests holding it, until,
        # its start key]
        self.held: dict[str, list] = {}

    def find(self, scope: str, prints: list[str], keys: list[str] | None = None) -> str | None:
        """The session whose conversation (as last left, or as a request in flight has it) the
        messages of ``prints`` extend (the longest), or None. ``keys``: ``chain(scope, prints)``,
        where the caller has it (``serving/sessions/seen_conversations.py``); so for the methods below."""
        for key in reversed(chain(scope, prints) if keys is None else keys):
            id = self.sessions.get(key)
            if id is None and key in self.held:
                id = self.held[key][0]
            if id is not None:
                return id
        return None

    def find_rewritten(self, scope: str, prints: list[str], keys: list[str] | None = None) -> str | None:
        """The session of ``scope`` whose conversation starts as ``prints`` do (the most
        recently used of them): the one a client-named conversation rewrote."""
        if not prints:
            return None
        return self.starts.get(chain(scope, prints[:1])[0] if keys is None else keys[0])

    def remember(self, id: str, scope: str, prints: list[str], keys: list[str] | None = None) -> None:
        """``id``'s conversation is now ``prints`` (after a request): index it there."""
        self.forget(id, held=False)
        if prints:
            keys = chain(scope, prints) if keys is None else keys
            self.sessions[keys[-1]] = id
            self.starts[keys[0]] = id
            self.keys[id] = (keys[-1], keys[0])
            while len(self.keys) > self.max_sessions:
                self.forget(next(iter(self.keys)))

    def hold(self, id: str, scope: str, prints: list[str], until: float = float("inf"),
             keys: list[str] | None = None) -> str | None:
        """A request of ``id`` whose conversation is ``prints`` is in flight: it is found there
        too until ``release`` (or, in a shared file, ``until``: a process that died mid-request
        holds nothing for long). Returns the key to release."""
        if not prints:
            return None
        keys = chain(scope, prints) if keys is None else keys
        entry = self.held.setdefault(keys[-1], [id, 0, until, keys[0]])
        entry[0], entry[1], entry[2] = id, entry[1] + 1, max(entry[2], until)
        self.starts.setdefault(keys[0], id)
        return keys[-1]

    def release(self, key: str | None) -> None:
        entry = self.held.get(key)
        if entry is not None:
            entry[1] -= 1
            if entry[1] <= 0:
                self.drop_held(key)

    def drop_held(self, key: str) -> None:
        id, _, _, start = self.held.pop(key)
        if self.starts.get(start) == id and self.keys.get(id, (None, None))[1] != start:
            del self.starts[start]  # only the request had made it a start

    def forget(self, id: str, held: bool = True) -> None:
        key, start = self.keys.pop(id, (None, None))
        if key is not None and self.sessions.get(key) == id:
            del self.sessions[key]
        if start is not None and self.starts.get(start) == id:
            del self.starts[start]
        if held:  # requests in flight are few: a scan
            for key in [key for key, entry in self.held.items() if entry[0] == id]:
                self.drop_held(key)

    def state(self, now: float) -> dict:
        """What a shared index file holds (held keys past their time left out)."""
        return {"keys": [[id, key, start] for id, (key, start) in self.keys.items()],
                "held": {key: entry for key, entry in self.held.items() if entry[2] > now},
                "starts": self.starts}

    @classmethod
    def from_state(cls, state: dict, now: float) -> ConversationIndex:
        index = cls()
        for id, key, start in state.get("keys", []):
            index.sessions[key], index.keys[id] = id, (key, start)
        index.starts = dict(state.get("starts", {}))
        index.held = {key: entry for key, entry in state.get("held", {}).items() if entry[2] > now}
        return index

    def __len__(self) -> int:
        return len(self.keys)


if __name__ == "__main__":
    index = ConversationIndex()
    caller = caller_of({"authorization": "Bearer team-a"}, None)
    first = [{"role": "user", "content": "Fix the tests."}]
    index.remember("sess_1", caller, [fingerprint(message) for message in first])
    later = first + [{"role": "assistant", "content": "ls"}, {"role": "user", "content": "a.py"}]
    print("continues:", index.find(caller, [fingerprint(message) for message in later]))
    print("another caller:", index.find(caller_of({"authorization": "Bearer team-b"}, None),
                                        [fingerprint(message) for message in later]))
    print("edited history:", index.find(caller, [fingerprint({"role": "user", "content": "Fix the build."})]))
