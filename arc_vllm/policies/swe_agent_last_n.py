"""swe_agent_last_n: SWE-agent's ``LastNObservations(n=5, polling=1)`` history processor.

Drops: the text of every observation but the last n, each replaced by
``Old environment output: (N lines omitted)``; the task (the instance template, our F) is
never elided. SWE-agent counts that template as its observation 0, so after T steps it masks
the first ((T+1)//p)*p - n - 1 of them: with ``polling`` p the masked count moves in jumps of
p, between n and n+p observations stay whole, and the cached prefix changes every p steps
instead of every step (for p = 1, all but the last n). Costs: nothing extra; the actions stay, so the prompt still grows with every step and
can overflow; a masked observation cannot be read again (SWE-agent's docstring notes that
this breaks prompt caching).
"""

from __future__ import annotations

from arc_vllm.policies.step_history import StepHistory, lines


class SweAgentLastN(StepHistory):
    name = "swe_agent_last_n"

    def __init__(self, counter, budget_tokens: int, *, task: str, n: int = 5, polling: int = 1, **kwargs):
        super().__init__(counter, budget_tokens, task=task, **kwargs)
        if n < 0 or polling < 1:
            raise ValueError(f"swe_agent_last_n: n={n} must be >= 0 and polling={polling} >= 1")
        self.n, self.polling = n, polling

    def shown(self, index):
        observations = len(self.steps) + 1  # SWE-agent's count: the instance template is the first
        masked = max(0, observations // self.polling * self.polling - self.n - 1)
        observation = self.steps[index].observation
        return observation if index >= masked else f"Old environment output: ({lines(observation)} lines omitted)"
