"""arc: Addressable Recall Compaction (``arc_vllm.core``) behind the policy protocol.

Drops: nothing (every observation stays in the ObsStore; old ones show as §id stubs and
come back exactly with ``_recall``). Costs: a deterministic compaction (no model call) when
the view would exceed its budget, and the recall steps the agent chooses to take.
"""

from __future__ import annotations

from arc_vllm.core.commands import ACTION_REGEX
from arc_vllm.core.context import ArcContext, arc_system
from arc_vllm.policies.base import agent_system


class ArcPolicy:
    name = "arc"
    # ARC's commands, for a model agent constrained to the protocol (core/commands.py grammar).
    action_regex = ACTION_REGEX

    def __init__(self, counter, budget_tokens: int, *, task: str, config,
                 system: str = arc_system(agent_system())):
        if config.input_budget_tokens != budget_tokens:
            raise ValueError(f"ArcConfig's L = {config.input_budget_tokens} differs from the "
                             f"loop's budget {budget_tokens}")
        self.context = ArcContext(config, counter, task=task, system=system)

    def observe(self, action, observation, *, thought="", returncode=None):
        self.context.observe(action, observation, thought=thought, returncode=returncode)

    def intercept(self, action, *, thought=""):
        results = self.context.act(action, thought=thought)
        return None if results is None else "\n".join(result.text for result in results)

    def render(self):
        return self.context.render().messages

    def on_overflow(self, error=None):
        self.context.on_overflow(error)

    def compact(self):
        self.context.compact()
