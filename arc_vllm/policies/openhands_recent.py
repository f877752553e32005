"""openhands_recent: OpenHands' ``RecentEventsCondenser(keep_first=1, max_events=10)``.

Drops: every event but the first ``keep_first`` (the task's user message, our F, is the
first) and the last ``max_events - keep_first``; here events are an action and its
observation, and a kept tail never starts on an observation without its action. Costs:
nothing extra; the prompt stays near a fixed number of steps but is not bounded in tokens
(one long observation can still overflow); forgotten steps are gone, and the cached prefix
ends at the task once the window slides.
"""

from __future__ import annotations

from arc_vllm.policies.step_history import StepHistory


class OpenHandsRecent(StepHistory):
    name = "openhands_recent"

    def __init__(self, counter, budget_tokens: int, *, task: str, keep_first: int = 1,
                 max_events: int = 10, **kwargs):
        super().__init__(counter, budget_tokens, task=task, **kwargs)
        if not 1 <= keep_first < max_events:
            raise ValueError(f"openhands_recent: need 1 <= keep_first={keep_first} < max_events={max_events}")
        self.keep_first, self.max_events = keep_first, max_events

    def shown(self, index):
        # Events after the task: 2 per step. Keep the first keep_first - 1 of them (the task
        # itself is the first event) and the last max_events - keep_first, in whole steps.
        head_steps = (self.keep_first - 1) // 2
        tail_steps = (self.max_events - self.keep_first) // 2
        if index < head_steps or index >= len(self.steps) - tail_steps:
            return self.steps[index].observation
        return None
