"""openhands_masking: OpenHands' ``ObservationMaskingCondenser(attention_window=5)``.

Drops: the content of every observation outside the last ``attention_window`` events
(an action and its observation are two events), replaced by ``<MASKED>``; actions stay.
Costs: nothing extra; the prompt still grows by an action per step, so long tasks
overflow; a masked observation cannot be read again.
"""

from __future__ import annotations

from arc_vllm.policies.step_history import StepHistory

MASK = "<MASKED>"


class OpenHandsMasking(StepHistory):
    name = "openhands_masking"

    def __init__(self, counter, budget_tokens: int, *, task: str, attention_window: int = 5, **kwargs):
        super().__init__(counter, budget_tokens, task=task, **kwargs)
        if attention_window < 1:
            raise ValueError(f"openhands_masking: attention_window={attention_window} must be >= 1")
        self.attention_window = attention_window

    def shown(self, index):
        # Step i's observation is event 2i+1 of 2T; it is kept if among the last w events.
        events = 2 * len(self.steps)
        return self.steps[index].observation if 2 * index + 1 >= events - self.attention_window else MASK
