"""The ContextPolicy protocol: what every context-management method offers the agent loop.

    policy.observe(action, observation, thought=..., returncode=...)  a normal tool step
    policy.intercept(action, thought=...)   a framework command served by the policy, or None
    policy.render()                          the prompt messages for the next model call
    policy.on_overflow(error)                the engine refused the prompt as too long
    policy.compact()                         a forced compaction (the paper's call indices)

A policy that cannot bring its prompt under the budget raises ``ContextOverflow``; the loop
counts that episode as crashed (no answer), as the paper does.
"""

from __future__ import annotations

from typing import Protocol


class ContextOverflow(RuntimeError):
    """The policy has no way to fit its prompt in the budget."""


class ContextPolicy(Protocol):
    name: str

    def observe(self, action: str, observation: str, *, thought: str = "",
                returncode: int | None = None) -> None: ...

    def intercept(self, action: str, *, thought: str = "") -> str | None: ...

    def render(self) -> list[dict]: ...

    def on_overflow(self, error: object = None) -> None: ...

    def compact(self) -> None: ...


def turn_messages(thought: str, action: str, observation: str) -> list[dict]:
    """One verbatim step as chat messages (the baselines' common serialisation)."""
    content = f"{thought}\nAction: {action}" if thought else f"Action: {action}"
    return [{"role": "assistant", "content": content},
            {"role": "user", "content": "Observation:\n" + observation}]


def prefix_messages(system: str, task: str) -> list[dict]:
    return [{"role": "system", "content": system}, {"role": "user", "content": task}]
