"""Implicit sessions: a request that names no session gets one by its conversation.

Clients of an OpenAI- or Anthropic-compatible server resend the whole conversation on every
request, so a conversation is recognised by the fingerprints of its messages
(``core/transcript.py`` ``fingerprint``, the same that tell a session which messages are
new), within a scope: the caller (``serving/conversation_keys.py``: the API key, ``user``),
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
The index holds at most ``max_sessions`` sessions, the least recently remembered forgotten
first: a durable session stays indexed when it is unloaded (its conversation reloads it), so
without the bound a server with a store folder would grow by one entry per conversation for
good. A forgotten session is still there by its id; only a conversation that names none
starts a new one.

Run ``python -m arc_vllm.serving.conversation_index`` for an example.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict

from arc_vllm.core.transcript import fingerprint

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


class ConversationIndex:
    def __init__(self, max_sessions: int = MAX_INDEXED):
        self.max_sessions = max_sessions
        self.sessions: dict[str, str] = {}  # key of a conversation so far -> session id
        # session id -> (its current key, its start key), least recently remembered first
        self.keys: OrderedDict[str, tuple[str, str]] = OrderedDict()
        self.starts: dict[str, str] = {}  # key of a conversation's first message -> session id

    def find(self, scope: str, messages: list[dict]) -> str | None:
        """The session whose conversation ``messages`` extend (the longest), or None."""
        keys = chain(scope, [fingerprint(message) for message in messages])
        for key in reversed(keys):
            id = self.sessions.get(key)
            if id is not None:
                return id
        return None

    def find_rewritten(self, scope: str, messages: list[dict]) -> str | None:
        """The session of ``scope`` whose conversation starts as ``messages`` do (the most
        recently used of them): the one a client-named conversation rewrote."""
        if not messages:
            return None
        return self.starts.get(chain(scope, [fingerprint(messages[0])])[0])

    def remember(self, id: str, scope: str, prints: list[str]) -> None:
        """``id``'s conversation is now ``prints`` (after a request): index it there."""
        self.forget(id)
        if prints:
            keys = chain(scope, prints)
            self.sessions[keys[-1]] = id
            self.starts[keys[0]] = id
            self.keys[id] = (keys[-1], keys[0])
            while len(self.keys) > self.max_sessions:
                self.forget(next(iter(self.keys)))

    def forget(self, id: str) -> None:
        key, start = self.keys.pop(id, (None, None))
        if key is not None and self.sessions.get(key) == id:
            del self.sessions[key]
        if start is not None and self.starts.get(start) == id:
            del self.starts[start]

    def __len__(self) -> int:
        return len(self.keys)


if __name__ == "__main__":
    from arc_vllm.serving.conversation_keys import caller_of

    index = ConversationIndex()
    caller = caller_of({"authorization": "Bearer team-a"}, None)
    first = [{"role": "user", "content": "Fix the tests."}]
    index.remember("sess_1", caller, [fingerprint(message) for message in first])
    later = first + [{"role": "assistant", "content": "ls"}, {"role": "user", "content": "a.py"}]
    print("continues:", index.find(caller, later))
    print("another caller:", index.find(caller_of({"authorization": "Bearer team-b"}, None), later))
    print("edited history:", index.find(caller, [{"role": "user", "content": "Fix the build."}]))
