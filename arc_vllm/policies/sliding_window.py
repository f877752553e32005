"""sliding_window: the newest steps that fit the budget, verbatim; the task prefix always.

Drops: every step older than the window, for good (nothing is stored elsewhere). Costs:
nothing extra; but each new step shifts the window, so the engine's cached prefix ends at
the task prefix once the window is full. A forced compaction keeps only the newest
``keep_after_compaction`` steps. Built on the shared history of ``policies/step_history.py``:
the window is its ``first`` kept step.
"""

from __future__ import annotations

from arc_vllm.policies.base import ContextOverflow
from arc_vllm.policies.step_history import StepHistory


class SlidingWindow(StepHistory):
    name = "sliding_window"

    def __init__(self, counter, budget_tokens: int, *, task: str, keep_after_compaction: int = 2,
                 **kwargs):
        super().__init__(counter, budget_tokens, task=task, **kwargs)
        self.keep_after_compaction = keep_after_compaction

    def render(self):
        messages = super().render()
        while self.counter.count_messages(messages) > self.budget_tokens:
            if self.first >= len(self.steps):
                raise ContextOverflow("the task prefix alone is over the budget")
            self.first += 1
            messages = super().render()
        return messages

    def on_overflow(self, error=None):
        if self.first >= len(self.steps) - 1:
            raise ContextOverflow("the newest step alone does not fit")
        self.first += 1

    def compact(self):
        self.first = max(self.first, len(self.steps) - self.keep_after_compaction)
