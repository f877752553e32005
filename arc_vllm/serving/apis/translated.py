"""A resent conversation is translated only past what was translated before.

The Messages and Responses adapters turn their API's items (Anthropic messages, Responses
input items) into chat messages with vLLM's converters, after vLLM's request model has
validated them: work for every item, on every request of a client that resends its whole
history. ``Translated`` keeps, for the conversations an adapter translated last, the items as
they were sent and the chat messages they became (the system prompt or instructions left
out: those are converted with each request). A request whose items extend a kept
conversation's (compared by value, one C-level comparison: ``transcript.common_prefix``) has
only its new items validated and converted, where converting them alone gives what
converting the whole would (the adapter's ``continues_alone``: a Responses function call
after an assistant message joins that message, so it is converted with it).

Kept under the caller and the first item's fingerprint, forgotten least recently used first
past ``max_conversations`` or ``max_chars`` of request bodies. The chat messages returned are
the kept ones, not copies: nothing downstream changes a request's messages in place.

Run ``python -m arc_vllm.serving.apis.translated`` for an example.
"""

from __future__ import annotations

from typing import Callable

from arc_vllm.core.lru import CharBoundedLRU
from arc_vllm.core.transcript import fingerprint
from arc_vllm.serving.sessions.seen_conversations import MAX_CHARS, MAX_CONVERSATIONS


class Translated:
    def __init__(self, max_conversations: int = MAX_CONVERSATIONS, max_chars: int = MAX_CHARS):
        # (caller, first item's fingerprint) -> (items, the chat messages they became), weighed
        # by the request body's size
        self.kept = CharBoundedLRU(max_chars, max_conversations)

    def prefix(self, caller: str, items: list, continues_alone: Callable[[list[dict]], bool]) -> tuple[int, list[dict]]:
        """``(k, messages)``: the first ``k`` of ``items`` are a kept conversation's, translated
        to ``messages``; the rest are new and convert alone. ``(0, [])`` when none is kept."""
        if not items or not isinstance(items, list):
            return 0, []
        kept = self.kept.get((caller, fingerprint(items[0])))
        if kept is None:
            return 0, []
        known, messages = kept
        shared = len(known)
        if len(items) <= shared or items[:shared] != known or not continues_alone(messages):
            return 0, []
        return shared, messages

    def keep(self, caller: str, items: list, messages: list[dict], size: int = 0) -> None:
        """``items`` became ``messages`` (the whole request's, its system prompt left out)."""
        if items and isinstance(items, list):
            self.kept.put((caller, fingerprint(items[0])), (items, messages), size)


if __name__ == "__main__":
    translated = Translated()
    items = [{"role": "user", "content": "Fix the tests."}, {"role": "assistant", "content": "ls"}]
    translated.keep("caller", items, [{"role": "user", "content": "Fix the tests."},
                                      {"role": "assistant", "content": "ls"}])
    resent = items + [{"role": "user", "content": "a.py b.py"}]
    print("resent, one new item:", translated.prefix("caller", resent, lambda messages: True))
    print("another caller:", translated.prefix("other", resent, lambda messages: True))
    print("edited:", translated.prefix("caller", [{"role": "user", "content": "Fix the build."}] + resent[1:],
                                       lambda messages: True))
