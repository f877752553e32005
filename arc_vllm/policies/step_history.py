"""The verbatim step history that full context, the sliding window and the peers share.

Every step is kept; a subclass decides what of it is shown. Full context shows all of it;
the sliding window forgets steps before ``first``; SWE-agent's and OpenHands' observation
maskers keep the agent's actions and replace old observations with a short placeholder,
and their windows drop whole steps. A subclass says,
for the steps as they are now, which observation is shown (``shown``: the text, a mask, or
None to drop the step). Masks are recomputed at every render from the whole history, so
they change only when a step arrives; nothing masked can be taken back (the text is not
stored anywhere the agent can reach).

Only the sliding window bounds the prompt (it forgets old steps to stay within its window);
the others' ``render`` returns what the method would send, whatever its size, and the caller
counts it as the engine would (a prompt over the window is an overflow). Run ``python -m arc_vllm.policies.step_history`` for the peers on a small history.
"""

from __future__ import annotations

from dataclasses import dataclass

from arc_vllm.policies.base import SYSTEM, ContextOverflow, Prompted, step_messages


@dataclass(frozen=True)
class HistoryStep:
    thought: str
    action: str
    observation: str


class StepHistory(Prompted):
    name = "step_history"  # the base: every subclass names itself

    def __init__(self, counter, budget_tokens: int, *, task: str, system: str = SYSTEM):
        super().__init__(counter, budget_tokens, task=task, system=system)
        self.steps: list[HistoryStep] = []  # steps[:first] are forgotten (windows); maskers keep them all

    def observe(self, action, observation, *, thought="", returncode=None):
        self.steps.append(HistoryStep(thought, action, observation))

    def intercept(self, action, *, thought=""):
        return None

    def shown(self, index: int) -> str | None:
        """The observation of step ``index`` as the method shows it (None: the step is
        left out). The base shows everything."""
        return self.steps[index].observation

    def render(self) -> list[dict]:
        messages = list(self.prefix)
        for index in range(self.first, len(self.steps)):
            observation = self.shown(index)
            if observation is None:
                continue
            step = self.steps[index]
            messages += step_messages(step.thought, step.action, observation)
        return messages

    def recoverable(self) -> int:
        """Observations the agent can still read exactly (shown unmasked now)."""
        return sum(1 for index in range(self.first, len(self.steps))
                   if self.shown(index) == self.steps[index].observation)

    def on_overflow(self, error=None):
        raise ContextOverflow(f"{self.name} has no answer to an overflow")

    def compact(self):
        pass  # the peers have no forced compaction: their masks follow the history alone


def lines(text: str) -> int:
    return text.count("\n") + (1 if text and not text.endswith("\n") else 0)


if __name__ == "__main__":
    from arc_vllm.offline import go_offline

    go_offline()  # a process starts here: tiktoken's files from this project's cache
    from arc_vllm.core.tokens import TiktokenCounter
    from arc_vllm.policies import PEERS, make_policy

    for name in PEERS:
        policy = make_policy(name, TiktokenCounter(), 4000, task="Fix the bug.")
        for step in range(8):
            policy.observe(f"open src/f{step % 3}.py", f"[File: src/f{step % 3}.py (3 lines total)]\n"
                           f"1:a\n2:b\n3:c {step}\n")
        print(name, [m["content"].splitlines()[1][:40] for m in policy.render()[3::2]])
