"""The agent loop: prompt -> agent -> (ARC command? served by the policy : tool) -> observe.

Before each call the forced-compaction schedule may compact (the paper's call indices); the
prompt is counted in real tokens, and a prompt over the budget is the engine's context-length
error: the policy's reactive path runs once, and a policy that still cannot fit crashes the
episode (no answer). Every call is recorded (prompt tokens, wall time) in the result.

Run ``python -m arc_vllm.agent.loop`` for one scripted NIAH episode per policy.
"""

from __future__ import annotations

import time

from arc_vllm.policies.base import ContextOverflow


def run_episode(policy, task, agent, counter, budget_tokens: int, *, force: tuple[int, ...] = (),
                max_calls: int = 60) -> dict:
    calls = []
    outcome = {"passed": False, "answered": False, "crashed": False}
    for index in range(1, max_calls + 1):
        if index in force:
            policy.compact()
        started = time.perf_counter()
        try:
            messages = policy.render()
            tokens = counter.count_messages(messages)
            if tokens > budget_tokens:
                policy.on_overflow(f"prompt of {tokens} tokens over {budget_tokens}")
                messages = policy.render()
                tokens = counter.count_messages(messages)
                if tokens > budget_tokens:
                    raise ContextOverflow(f"{tokens} tokens after the policy's overflow path")
        except ContextOverflow as error:
            outcome.update(crashed=True, reason=str(error))
            break
        thought, action = agent.act(messages)
        calls.append({"prompt_tokens": tokens, "ms": round((time.perf_counter() - started) * 1000, 3)})
        verdict = task.score(action)
        if verdict is not None:
            outcome.update(passed=verdict, answered=True)
            break
        if action == "give up":
            outcome["reason"] = "gave up"
            break
        if policy.intercept(action, thought=thought) is not None:
            continue
        observation, returncode = task.run(action)
        policy.observe(action, observation, thought=thought, returncode=returncode)
    else:
        outcome["reason"] = f"no answer within {max_calls} calls"
    return {"task": task.id, "method": policy.name, **outcome, "calls": len(calls),
            "prompt_tokens": sum(call["prompt_tokens"] for call in calls),
            "max_prompt_tokens": max((call["prompt_tokens"] for call in calls), default=0)}


if __name__ == "__main__":
    from arc_vllm.agent.niah import make_task
    from arc_vllm.agent.scripted import ScriptedAgent
    from arc_vllm.core.config import ArcConfig
    from arc_vllm.core.tokens import load_counter
    from arc_vllm.policies import POLICIES

    counter = load_counter(None)
    config = ArcConfig.for_window(4096, 512)
    task = make_task(42, 0)
    for name, policy_class in POLICIES.items():
        extra = {"config": config} if name == "arc" else {}
        policy = policy_class(counter, config.input_budget_tokens, task=task.prompt, **extra)
        print(run_episode(policy, task, ScriptedAgent(), counter, config.input_budget_tokens,
                          force=(5, 10, 15)))
