"""What a request costs when it resends a conversation: only its new part.

Agents that never compact (Claude Code, Codex, most of those built on chat completions) send
their whole history on every request. Fingerprinting every message (``core/transcript.py``),
and chaining the fingerprints into the conversation index's keys
(``serving/sessions/conversation_index.py``), would then cost each request time in proportion to the
history, 1,600 steps of it being about 5 MB. ``SeenConversations`` keeps, for the
conversations this process saw last, the messages as the last request sent them with their
fingerprints, and the index keys of those fingerprints: a request whose messages start as a
kept conversation's did is compared with it by value (one C-level comparison,
``transcript.common_prefix``) and fingerprinted and chained only past what they share.

A conversation is kept under its caller and its first message's fingerprint, so one caller's
requests never reuse another's entry (whatever it holds is derived from the same text; it is
kept apart all the same). Entries are forgotten least recently used first, past
``max_conversations`` or past ``max_chars`` of kept messages (the request bodies' sizes), so
the cache's memory has a bound whatever clients send.

Run ``python -m arc_vllm.serving.sessions.seen_conversations`` for an example.
"""

from __future__ import annotations

from arc_vllm.core.lru import CharBoundedLRU
from arc_vllm.core.transcript import common_prefix, fingerprint, fingerprints
from arc_vllm.serving.sessions.conversation_index import chain

MAX_CONVERSATIONS = 1024
MAX_CHARS = 256 * 2 ** 20  # of request bodies whose messages are kept
KEY_CHARS = 2 * 40  # what one message's fingerprint and chained key weigh, about


class SeenConversations:
    def __init__(self, max_conversations: int = MAX_CONVERSATIONS, max_chars: int = MAX_CHARS):
        # (caller, first message's fingerprint) -> (messages, their fingerprints), weighed by
        # the request body's size
        self.prints_of = CharBoundedLRU(max_chars, max_conversations)
        # (index scope, first fingerprint) -> (fingerprints, their chain keys)
        self.keys_of = CharBoundedLRU(max_chars, max_conversations)

    def prints(self, messages: list[dict], caller: str, size: int = 0) -> list[str]:
        """The fingerprints of ``messages`` (sent by ``caller``; ``size``: the body's length,
        what keeping them weighs), computed past the part a kept conversation shares."""
        if not messages:
            return []
        first = fingerprint(messages[0])
        kept = self.prints_of.get((caller, first))
        if kept is not None:
            same = common_prefix(messages, kept[0])
            prints = kept[1][:same] + fingerprints(messages[same:])
        else:
            prints = [first] + fingerprints(messages[1:])
        self.prints_of.put((caller, first), (messages, prints), size)
        return prints

    def keys(self, scope: str, prints: list[str]) -> list[str]:
        """``conversation_index.chain(scope, prints)``, chained past the fingerprints a kept
        conversation of ``scope`` shares."""
        if not prints:
            return []
        kept = self.keys_of.get((scope, prints[0]))
        if kept is not None:
            same = common_prefix(prints, kept[0])
            keys = kept[1][:same] + chain(kept[1][same - 1] if same else scope, prints[same:])
        else:
            keys = chain(scope, prints)
        self.keys_of.put((scope, prints[0]), (prints, keys), KEY_CHARS * len(prints))
        return keys


if __name__ == "__main__":
    import time

    seen = SeenConversations()
    history = [{"role": "user", "content": "Fix the tests."}]
    for step in range(1600):
        history += [{"role": "assistant", "content": f"cat f{step}.py"},
                    {"role": "user", "content": f"line {step}\n" * 150}]
    resent = [dict(message) for message in history]  # as a client resends it: equal, not the same
    for name, messages in (("first request", history), ("resent whole", resent)):
        started = time.perf_counter()
        prints = seen.prints(messages, "caller")
        keys = seen.keys("caller", prints)
        print(f"{name}: {len(messages)} messages, {(time.perf_counter() - started) * 1000:.1f} ms")
    assert prints == fingerprints(history) and keys == chain("caller", prints)
