"""openhands_window: OpenHands' ``ConversationWindowCondenser``, triggered by an overflow.

Drops: when the engine refuses the prompt as too long, about half of the events after the
task (the system prompt, the first user message and its recall observation stay), oldest
first, never starting the kept part on a dangling observation (so whole steps here); the
forgotten steps are gone. Until an overflow it sends everything. Costs: one refused call
per condensation (the engine's context-length error is its trigger), and the cached prefix
ends at the task after each one.
"""

from __future__ import annotations

from arc_vllm.policies.base import ContextOverflow
from arc_vllm.policies.step_history import StepHistory


class OpenHandsWindow(StepHistory):
    name = "openhands_window"

    def on_overflow(self, error=None):
        remaining = len(self.steps) - self.first
        if remaining <= 1:
            raise ContextOverflow("openhands_window: the newest step alone does not fit")
        # Keep the newer half (rounded up) of the events, in whole steps.
        self.first += remaining // 2
