"""The agent loop: prompt -> agent -> (ARC command? served by the policy : tool) -> observe.

Before each call the forced-compaction schedule may compact (the paper's call indices). The
prompt is counted in real tokens; over the budget is a context-length error, and so is the
engine's own refusal (``ContextLengthError`` from a model backend): either way the policy's
reactive path runs once and the call is retried; a policy that still cannot fit crashes the
episode (no answer). Every call is recorded: prompt tokens, cached prompt tokens where the
engine reports them, generated tokens, wall time; model calls a policy makes for itself
(summaries, state) are recorded too, as extra model work (``trace``).

Run ``python -m arc_vllm.evaluation.scripted`` for one scripted NIAH episode per policy (the loop
needs a task and an agent, which live with the benchmarks: ``evaluation/``).
"""

from __future__ import annotations

import time

from arc_vllm.agent.backends import ContextLengthError
from arc_vllm.core import formats
from arc_vllm.policies.base import ContextOverflow


def fit(policy, counter, budget_tokens: int) -> tuple[list[dict], int]:
    """The policy's prompt, within the budget after at most one reactive step."""
    messages = policy.render()
    tokens = counter.count_messages(messages)
    if tokens > budget_tokens:
        policy.on_overflow(f"prompt of {tokens} tokens over {budget_tokens}")
        messages = policy.render()
        tokens = counter.count_messages(messages)
        if tokens > budget_tokens:
            raise ContextOverflow(f"{tokens} tokens after the policy's overflow path")
    return messages, tokens


def decide(policy, agent, counter, budget_tokens: int) -> tuple[str, str, int]:
    messages, tokens = fit(policy, counter, budget_tokens)
    try:
        thought, action = agent.act(messages)
    except ContextLengthError as error:  # the engine's limit, below our count: compact, retry once
        policy.on_overflow(error)
        messages, tokens = fit(policy, counter, budget_tokens)
        thought, action = agent.act(messages)
    return thought, action, tokens


def run_episode(policy, task, agent, counter, budget_tokens: int, *, force: tuple[int, ...] = (),
                max_calls: int = 60) -> dict:
    trace: list[dict] = []
    take_model_calls = getattr(policy, "take_model_calls", list)
    outcome = {"passed": False, "answered": False, "crashed": False}
    for index in range(1, max_calls + 1):
        if index in force:
            policy.compact()
        started = time.perf_counter()
        try:
            thought, action, tokens = decide(policy, agent, counter, budget_tokens)
        except (ContextOverflow, ContextLengthError) as error:
            outcome.update(crashed=True, reason=f"{type(error).__name__}: {str(error)[:300]}")
            trace += take_model_calls()
            break
        usage = getattr(agent, "usage", None) or {}
        trace += take_model_calls()
        trace.append({"kind": "agent", "prompt_tokens": tokens, "cached_tokens": usage.get("cached_tokens"),
                      "generated_tokens": usage.get("generated_tokens")
                      or counter.count(formats.react_action(thought, action)),
                      "ms": round((time.perf_counter() - started) * 1000, 3)})
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
        trace += take_model_calls()
    else:
        outcome["reason"] = f"no answer within {max_calls} calls"
    return episode_record(task.id, policy.name, outcome, trace,
                          getattr(policy, "num_invalid", None))


def episode_record(task_id: str, method: str, outcome: dict, trace: list[dict],
                   invalid_states: int | None = None) -> dict:
    """One attempt's record (``outcome``: passed, answered, crashed, reason) with its figures
    summed from the trace; a crash before any call is ``trace=[]``."""
    agent_calls = [call for call in trace if call["kind"] == "agent"]
    model_calls = [call for call in trace if call["kind"] != "agent"]
    cached = [call["cached_tokens"] for call in trace if call["cached_tokens"] is not None]
    return {"task": task_id, "method": method, **outcome, "calls": len(agent_calls),
            "prompt_tokens": sum(call["prompt_tokens"] for call in agent_calls),
            "max_prompt_tokens": max((call["prompt_tokens"] for call in agent_calls), default=0),
            "generated_tokens": sum(call["generated_tokens"] for call in trace),
            "cached_tokens": sum(cached) if cached else None,
            "model_calls": len(model_calls), "model_ms": round(sum(call["ms"] for call in model_calls), 1),
            **({"invalid_states": invalid_states} if invalid_states is not None else {}),
            "trace": [[call["kind"], call["prompt_tokens"], call["generated_tokens"], call["cached_tokens"],
                       call["ms"]] for call in trace]}

