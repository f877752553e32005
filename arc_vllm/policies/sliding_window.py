"""sliding_window: the newest steps that fit the budget, verbatim; the task prefix always.

Drops: every step older than the window, for good (nothing is stored elsewhere). Costs:
nothing extra; but each new step shifts the window, so the engine's cached prefix ends at
the task prefix once the window is full. A forced compaction keeps only the newest
``keep_after_compaction`` steps.
"""

from __future__ import annotations

from arc_vllm.policies.base import SYSTEM, ContextOverflow, prefix_messages, turn_messages


class SlidingWindow:
    name = "sliding_window"

    def __init__(self, counter, budget_tokens: int, *, task: str, system: str = SYSTEM,
                 keep_after_compaction: int = 2):
        self.counter = counter
        self.budget_tokens = budget_tokens
        self.prefix = prefix_messages(system, task)
        self.steps: list[list[dict]] = []
        self.first = 0  # steps[:first] have left the window for good
        self.keep_after_compaction = keep_after_compaction

    def observe(self, action, observation, *, thought="", returncode=None):
        self.steps.append(turn_messages(thought, action, observation))

    def intercept(self, action, *, thought=""):
        return None

    def _messages(self) -> list[dict]:
        return self.prefix + [m for step in self.steps[self.first:] for m in step]

    def render(self):
        messages = self._messages()
        while self.counter.count_messages(messages) > self.budget_tokens:
            if self.first >= len(self.steps):
                raise ContextOverflow("the task prefix alone is over the budget")
            self.first += 1
            messages = self._messages()
        return messages

    def on_overflow(self, error=None):
        if self.first >= len(self.steps) - 1:
            raise ContextOverflow("the newest step alone does not fit")
        self.first += 1

    def compact(self):
        self.first = max(self.first, len(self.steps) - self.keep_after_compaction)
