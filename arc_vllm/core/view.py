"""The active view: Serialize(F, S, G, H, U) into chat messages, and what each part costs.

Message order is chosen for the engine's prefix cache: what changes least comes first.

    F  system prompt + task            fixed for the whole task           <= B
    S  summary of older turns          changes only at a compaction       <= M
    G  one catalog page                changes when the page does         <= P
    H  recent turns, verbatim          grows by appending                 <= R
    U  recalled content                changes on a recall                <= Q

so the view after turn t+1 shares everything up to the end of turn t with the view after
turn t unless a compaction or a recall intervened. A part's cost is its tokens *as a chat
message* of the serving model's template (``MessageSizer``), and the final check counts the
whole prompt as the template renders it.

Run ``python -m arc_vllm.core.view`` to print a view of a small synthetic history.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

ANCHOR = {"role": "system", "content": "anchor"}


class MessageSizer:
    """Tokens one message adds to a prompt (its content plus its template framing), measured
    with the real template as the difference it makes after a fixed first message, and cached
    by (role, content)."""

    def __init__(self, counter, max_chars: int = 2_000_000):
        self.counter = counter
        self._base = counter.count_messages([ANCHOR])
        self._cache: OrderedDict[tuple[str, str], int] = OrderedDict()
        self.max_chars = max_chars  # keys are message texts: bound what they hold
        self._chars = 0

    def __call__(self, message: dict) -> int:
        key = (message["role"], message["content"])
        cached = self._cache.get(key)
        if cached is None:
            cached = self.counter.count_messages([ANCHOR, message]) - self._base
            self._cache[key] = cached
            self._chars += len(key[1])
            while self._chars > self.max_chars and len(self._cache) > 1:
                (_, evicted), _ = self._cache.popitem(last=False)
                self._chars -= len(evicted)
        else:
            self._cache.move_to_end(key)
        return cached

    def text(self, content: str, role: str = "user") -> int:
        return self({"role": role, "content": content}) if content else 0


@dataclass
class View:
    """One rendered prompt and its accounting (``tokens`` is the exact template count)."""

    messages: list[dict]
    tokens: int
    budget_tokens: int
    components: dict[str, int] = field(default_factory=dict)
    compacted: bool = False
    step: int = 0

    @property
    def within_budget(self) -> bool:
        return self.tokens <= self.budget_tokens


def user(content: str) -> dict:
    return {"role": "user", "content": content}


def serialize(prefix: list[dict], summary: str, catalog_page: str, recent: list[dict],
              recalled: str) -> list[dict]:
    """Serialize(F, S, G, H, U): empty parts are left out."""
    messages = list(prefix)
    if summary:
        messages.append(user(summary))
    if catalog_page:
        messages.append(user(catalog_page))
    messages.extend(recent)
    if recalled:
        messages.append(user(recalled))
    return messages


def recalled_block(items: list[tuple[str, str]]) -> str:
    """U: the materialised bodies, exactly, each between labelled markers."""
    if not items:
        return ""
    parts = ["[ARC RECALLED · exact stored text; least recently used recalls fall back to "
             "stubs when space runs out]"]
    for label, body in items:
        parts.append(f"<<< {label} >>>\n{body}\n<<< end {label.split()[0]} >>>")
    return "\n".join(parts)


if __name__ == "__main__":
    from arc_vllm.core.config import ArcConfig
    from arc_vllm.core.context import ArcContext
    from arc_vllm.core.tokens import TiktokenCounter

    context = ArcContext(ArcConfig.for_window(4096, 512), TiktokenCounter(),
                         task="Find the needle in secrets.txt")
    for step in range(12):
        context.observe(f"cat file{step}.txt", f"line of file {step}\n" * 120, thought="reading")
    view = context.render()
    for message in view.messages:
        print(f"--- {message['role']}\n{message['content'][:400]}")
    print(view.components, view.tokens, "<=", view.budget_tokens)
