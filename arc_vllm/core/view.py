"""The active view: Serialize(F, W, S, G, H, U) into chat messages, and what each part costs.

Message order is chosen for the engine's prefix cache: what changes least comes first.

    F  system prompt + task            fixed for the whole task           <= B
    W  the user's own messages that    grows when one leaves H; changes    <= W
       left H (core/human_turns.py)    where one is shortened
    S  summary of older turns          changes only at a compaction       <= M
    G  one catalog page                changes when the page does         <= P
    H  recent turns, verbatim          grows by appending                 <= R
    U  recalled content                changes on a recall                <= Q

so the view after turn t+1 shares everything up to the end of turn t with the view after
turn t unless a compaction or a recall intervened. A part's cost is its tokens *as a chat
message* of the serving model's template (``MessageSizer``), and the final check counts the
whole prompt as the template renders it.

The view also carries the ``tools`` the engine renders into the prompt (a tool-aware chat
template writes their schemas into the system turn), so its token count is of the prompt
the engine gets. Run ``python -m arc_vllm.core.context`` to print a view of a small history.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

from arc_vllm.core.lru import CharBoundedLRU

ANCHOR = {"role": "system", "content": "anchor"}
# An assistant message with reasoning is measured after a user's query, where the templates that
# keep the current tool loop's thinking (Qwen3's, GLM's) render it.
QUERY = {"role": "user", "content": "query"}


class MessageSizer:
    """Tokens one message adds to a prompt (its content plus its template framing), measured
    with the real template as the difference it makes after a fixed first message (and a
    user's query, for a message with reasoning), and cached by (role, content)."""

    def __init__(self, counter, max_chars: int = 2_000_000):
        self.counter = counter
        self._base = counter.count_messages([ANCHOR])
        self._queried = counter.count_messages([ANCHOR, QUERY])
        self.cache = CharBoundedLRU(max_chars)  # keys are message texts: bound what they hold

    def __call__(self, message: dict) -> int:
        if message.keys() <= {"role", "content"}:
            key = (message["role"], message["content"] or "")
        else:  # tool calls and tool results: their structure is rendered too
            key = (message["role"], json.dumps(message, sort_keys=True, ensure_ascii=False))
        cached = self.cache.get(key)
        if cached is None:
            if message.get("reasoning"):
                cached = self.counter.count_messages([ANCHOR, QUERY, message]) - self._queried
            else:
                cached = self.counter.count_messages([ANCHOR, message]) - self._base
            self.cache.put(key, cached, len(key[1]))
        return cached

    def text(self, content: str, role: str = "user") -> int:
        return self({"role": role, "content": content}) if content else 0

    def messages(self, messages: list[dict]) -> int:
        return sum(self(message) for message in messages)


@dataclass
class View:
    """One rendered prompt and its accounting (``tokens`` is the exact template count)."""

    messages: list[dict]
    tokens: int
    budget_tokens: int
    components: dict[str, int] = field(default_factory=dict)
    compacted: bool = False
    step: int = 0
    tools: list[dict] | None = None
    # The human turns it shows whole, shortened and left out, and the messages holding them.
    human_turns: dict = field(default_factory=dict)
    # A compacted view: the tokens the compaction freed, and those it left the engine to
    # prefill anew from the first token that differs from the last view's (None: not known)
    freed_tokens: int = 0
    uncached_tokens: int | None = None


def uncached_tokens(last: list[dict], now: list[dict], sizer: MessageSizer, tokens: int) -> int:
    """Of a view of ``tokens`` (``now``), those after what it shares with ``last`` at its start:
    the leading messages equal to the last view's, then the text the first that differs starts
    with (S and the catalog page grow at their end). What the engine prefills anew after a
    compaction, in the sizer's tokens (a message-level estimate: no tokenisation of either
    prompt)."""
    kept = 0
    for old, new in zip(last, now):
        if old == new:
            kept += sizer(new)
            continue
        if old.get("role") == new.get("role") and isinstance(old.get("content"), str) \
                and isinstance(new.get("content"), str):
            common = os.path.commonprefix([old["content"], new["content"]])
            kept += sizer.counter.count(common) if common else 0
        break
    return max(0, tokens - kept)


def user(content: str) -> dict:
    return {"role": "user", "content": content}


def serialize(prefix: list[dict], humans: str, summary: str, catalog_page: str, recent: list[dict],
              recalled: str) -> list[dict]:
    """Serialize(F, W, S, G, H, U): empty parts are left out."""
    messages = list(prefix)
    if humans:
        messages.append(user(humans))
    if summary:
        messages.append(user(summary))
    if catalog_page:
        messages.append(user(catalog_page))
    messages.extend(recent)
    if recalled:
        messages.append(user(recalled))
    return messages
