"""Implicit sessions: a chat request that names no session gets one by its conversation.

Clients of an OpenAI-compatible server resend the whole conversation on every request, so a
conversation is recognised by the fingerprints of its messages (``core/transcript.py``
``fingerprint``, the same that tell a session which messages are new), keyed also by the
caller (the request's ``Authorization`` value and its ``user`` field): two callers never
share a session, whatever they send.

``ConversationIndex`` maps (caller, the fingerprints of a session's conversation so far) to
that session. A request continues the session whose recorded conversation its messages
extend, the longest one if several do; otherwise (a new conversation, or one whose history
diverges from every session's, as when an agent edits its own history) it starts a new
session, in which what earlier sessions stored is not recallable. Keys are chained hashes,
so finding the longest match is one pass over the request's messages.

Run ``python -m arc_vllm.serving.conversation_index`` for an example.
"""

from __future__ import annotations

import hashlib

from arc_vllm.core.transcript import fingerprint


def caller_of(authorization: str | None, user) -> str:
    """Who is asking: the API key (or any Authorization value) and the body's ``user``."""
    raw = f"{authorization or ''}\x1f{user if isinstance(user, str) else ''}"
    return hashlib.sha1(raw.encode()).hexdigest()


def chain(caller: str, prints: list[str]) -> list[str]:
    """The key of every prefix of a conversation: ``keys[k - 1]`` is its first k messages'."""
    keys, key = [], caller
    for print_ in prints:
        key = hashlib.sha1(f"{key}\x1f{print_}".encode()).hexdigest()
        keys.append(key)
    return keys


class ConversationIndex:
    def __init__(self):
        self.sessions: dict[str, str] = {}  # key of a conversation so far -> session id
        self.keys: dict[str, str] = {}  # session id -> its current key

    def find(self, caller: str, messages: list[dict]) -> str | None:
        """The session whose conversation ``messages`` extend (the longest), or None."""
        keys = chain(caller, [fingerprint(message) for message in messages])
        for key in reversed(keys):
            id = self.sessions.get(key)
            if id is not None:
                return id
        return None

    def remember(self, id: str, caller: str, prints: list[str]) -> None:
        """``id``'s conversation is now ``prints`` (after a request): index it there."""
        self.forget(id)
        if prints:
            key = chain(caller, prints)[-1]
            self.sessions[key] = id
            self.keys[id] = key

    def forget(self, id: str) -> None:
        key = self.keys.pop(id, None)
        if key is not None and self.sessions.get(key) == id:
            del self.sessions[key]


if __name__ == "__main__":
    index = ConversationIndex()
    caller = caller_of("Bearer team-a", None)
    first = [{"role": "user", "content": "Fix the tests."}]
    index.remember("sess_1", caller, [fingerprint(message) for message in first])
    later = first + [{"role": "assistant", "content": "ls"}, {"role": "user", "content": "a.py"}]
    print("continues:", index.find(caller, later))
    print("another caller:", index.find(caller_of("Bearer team-b", None), later))
    print("edited history:", index.find(caller, [{"role": "user", "content": "Fix the build."}]))
