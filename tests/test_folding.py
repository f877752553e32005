"""llm_summary and structured_state on a real engine (tiny model): folds keep the prompt in
budget, every fold is a recorded model call, a fold request always fits the engine's window,
invalid JSON leaves the previous state, and the schema drops what it does not model."""

import json

import pytest

from arc_vllm.agent.loop import run_episode
from arc_vllm.evaluation.niah import make_task
from arc_vllm.evaluation.scripted import ScriptedAgent
from arc_vllm.policies import LlmSummary, StructuredState, make_policy
from arc_vllm.policies.structured_state import parse_state

pytestmark = pytest.mark.slow
BUDGET = 1500


def test_parse_state_keeps_the_schema_and_drops_the_rest():
    text = 'noise {"goal": "find it", "completed_actions": ["cat a", 3, {"x": 1}], ' \
           '"findings": "not a list", "next_step": "x" , "secret": "NEEDLE=AAA"} tail'
    state = parse_state(text, field_max_chars=4)
    assert state == {"goal": "find", "completed_actions": ["cat ", "3"], "findings": [], "next_step": "x"}
    assert parse_state('{"goal": "cut') is None and parse_state("no json") is None
    assert parse_state("[1, 2]") is None


@pytest.mark.parametrize("policy_class", [LlmSummary, StructuredState])
def test_folds_keep_the_prompt_in_budget_and_are_recorded(policy_class, tiny_engine, smol):
    policy = policy_class(smol, BUDGET, task="Remember everything.", backend=tiny_engine, fold_max_tokens=48)
    for step in range(8):
        policy.observe(f"cat part{step}.txt", f"part {step}: " + "lima echo " * 150)
        assert smol.count_messages(policy.render()) <= BUDGET
    calls = policy.take_model_calls()
    assert policy.first > 0 and len(calls) == policy.num_folds > 0
    assert all(call["kind"] == policy.name and call["generated_tokens"] <= 48 for call in calls)
    assert policy.take_model_calls() == []  # taken once
    assert smol.count(policy.memory) <= 48 + 200  # bounded: one reply (state: capped JSON)


def test_a_step_longer_than_the_window_is_cut_for_the_fold_request(tiny_engine, smol):
    policy = LlmSummary(smol, BUDGET, task="t", backend=tiny_engine, fold_max_tokens=16)
    policy.observe("cat big.txt", "oscar papa " * 3000)  # about 6,000 tokens: over the 2,048 window
    assert smol.count_messages(policy.render()) <= BUDGET  # folded, and the engine took the request
    assert policy.num_folds == 1


def test_invalid_json_leaves_the_previous_state(tiny_engine, smol):
    policy = StructuredState(smol, BUDGET, task="t", backend=tiny_engine, fold_max_tokens=3)
    for step in range(4):
        policy.observe(f"cat {step}", "kilo " * 500)
    policy.render()
    assert policy.num_invalid == policy.num_folds > 0  # 3 tokens cannot close a JSON object
    assert json.loads(policy.memory) == {"goal": "", "completed_actions": [], "findings": [], "next_step": ""}


def test_the_loop_records_fold_calls_as_extra_model_work(tiny_engine, smol):
    task = make_task(42, 0)
    # 32 tokens a fold, not the default 128: the tiny model fills whatever it is given, and the
    # loop's record of the calls, not their length, is what is checked here.
    policy = LlmSummary(smol, BUDGET, task=task.prompt, backend=tiny_engine, fold_max_tokens=32)
    result = run_episode(policy, task, ScriptedAgent(), smol, BUDGET, force=(5,))
    kinds = [entry[0] for entry in result["trace"]]
    assert result["model_calls"] == kinds.count("llm_summary") > 0
    assert result["calls"] == kinds.count("agent") and result["max_prompt_tokens"] <= BUDGET


def test_model_policies_need_a_backend(smol):
    with pytest.raises(ValueError, match="needs a model backend"):
        make_policy("structured_state", smol, BUDGET, task="t")
    with pytest.raises(ValueError, match="unknown method"):
        make_policy("oracle", smol, BUDGET, task="t")
