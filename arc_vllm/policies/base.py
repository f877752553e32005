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

from arc_vllm.core import formats

# Every method's agent sees the same protocol: the model agent parses the `Action:` line.
ACTION_FORMAT = ("Reply with at most one short line of thought, then one line `Action: <command>`; "
                 "when you know the answer, the action is the submission the task asks for.")
SYSTEM = "You are an agent that solves tasks with tools. " + ACTION_FORMAT


def agent_system(recorded: str = "") -> str:
    """The system prompt every method's agent gets: a recorded agent's own first, then the
    shared protocol. ARC's is this plus its note (``core.context.arc_system``)."""
    return f"{recorded}\n\n{SYSTEM}" if recorded else SYSTEM


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


class ModelCalls:
    """For policies that call a model (summaries, state): each call is recorded as extra model
    work, and the loop takes the records after every step (``take_model_calls``)."""

    def _record(self, kind: str, completion) -> None:
        self.__dict__.setdefault("_model_calls", []).append(
            {"kind": kind, "prompt_tokens": completion.prompt_tokens,
             "cached_tokens": completion.cached_tokens,
             "generated_tokens": completion.generated_tokens, "ms": completion.ms})

    def take_model_calls(self) -> list[dict]:
        calls = self.__dict__.get("_model_calls", [])
        self._model_calls = []
        return calls


class Prompted:
    """What a baseline policy starts from, once: the serving model's counter, the prompt's budget
    in its tokens, the task, and the task prefix F (system prompt, task) every prompt opens with;
    ``first``: the steps before it are out of the prompt (folded, forgotten, retrieved only)."""

    def __init__(self, counter, budget_tokens: int, *, task: str, system: str = SYSTEM):
        self.counter = counter
        self.budget_tokens = budget_tokens
        self.task = task
        self.prefix = prefix_messages(system, task)
        self.first = 0


def step_messages(thought: str, action: str, observation: str) -> list[dict]:
    """One verbatim step as chat messages (the baselines' common serialisation)."""
    return [{"role": "assistant", "content": formats.react_action(thought, action)},
            {"role": "user", "content": formats.observation_block(observation, True)}]


def prefix_messages(system: str, task: str) -> list[dict]:
    return [{"role": "system", "content": system}, {"role": "user", "content": task}]
