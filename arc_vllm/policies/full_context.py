"""full_context: no compaction. Keeps every step verbatim.

Drops: nothing. Costs: the prompt grows with every step, so a long task overflows the
window; it has no answer to an overflow (``on_overflow`` raises ``ContextOverflow``).
"""

from __future__ import annotations

from arc_vllm.policies.base import SYSTEM, ContextOverflow, prefix_messages, turn_messages

class FullContext:
    name = "full_context"

    def __init__(self, counter, budget_tokens: int, *, task: str, system: str = SYSTEM):
        self.counter = counter
        self.budget_tokens = budget_tokens
        self.messages = prefix_messages(system, task)

    def observe(self, action, observation, *, thought="", returncode=None):
        self.messages += turn_messages(thought, action, observation)

    def intercept(self, action, *, thought=""):
        return None

    def render(self):
        return list(self.messages)

    def on_overflow(self, error=None):
        raise ContextOverflow("full_context keeps everything and cannot compact")

    def compact(self):
        pass  # nothing to do: forced compactions leave full context unchanged
