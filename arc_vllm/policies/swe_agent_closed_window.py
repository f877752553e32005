"""swe_agent_closed_window: SWE-agent's ``ClosedWindowHistoryProcessor``.

Drops: a file-viewer window (an observation that starts ``[File: PATH``) of a file that is
shown again later, replaced by ``Outdated window with N lines omitted...``; every other
observation stays whole. Costs: nothing extra; histories that do not re-open files are not
shortened at all, so it overflows like full context; a replaced window is gone.
"""

from __future__ import annotations

import re

from arc_vllm.policies.step_history import StepHistory, lines

WINDOW = re.compile(r"\[File: (\S+)")


def window_file(observation: str) -> str | None:
    match = WINDOW.match(observation.lstrip())
    return match.group(1) if match else None


class SweAgentClosedWindow(StepHistory):
    name = "swe_agent_closed_window"

    def shown(self, index):
        observation = self.steps[index].observation
        path = window_file(observation)
        if path is not None and any(window_file(step.observation) == path
                                    for step in self.steps[index + 1:]):
            return f"Outdated window with {lines(observation)} lines omitted..."
        return observation
