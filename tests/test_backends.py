"""Model backends and the model agent on a real in-process vLLM engine (tiny model): batching
across threads, the engine's context-length refusal, structured outputs, and the loop's
reactive path when the engine (not our count) refuses the prompt."""

import re
import threading

import pytest

from arc_vllm.agent.backends import ContextLengthError, make_backend
from arc_vllm.agent.loop import run_episode
from arc_vllm.agent.model_agent import action_grammar, model_agent, parse_reply
from arc_vllm.evaluation.niah import make_task
from arc_vllm.policies import SlidingWindow

pytestmark = pytest.mark.slow


def test_parse_reply_takes_the_last_action_line():
    assert parse_reply("Thought: read it\nAction: cat a.txt") == ("read it", "cat a.txt")
    assert parse_reply("x\n**Action:** `cat b.txt`\nAction: submit NEEDLE=Q") == \
        ("x\n**Action:** `cat b.txt`", "submit NEEDLE=Q")
    assert parse_reply("cat c.txt\nmore") == ("", "cat c.txt")
    assert parse_reply("") == ("", "")


def test_concurrent_callers_share_batches_and_get_their_own_answers(tiny_engine):
    before = tiny_engine.num_batches
    results = [None] * 6

    def ask(index):
        results[index] = tiny_engine.complete([{"role": "user", "content": f"number {index}"}], 8)

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(r.generated_tokens > 0 and r.prompt_tokens > 0 for r in results)
    assert tiny_engine.num_batches - before < 6  # at least two requests shared a batch


def test_engine_refusal_is_a_context_length_error_for_that_caller_only(tiny_engine):
    with pytest.raises(ContextLengthError, match="maximum context length"):
        tiny_engine.complete([{"role": "user", "content": "word " * 3000}], 8)
    assert tiny_engine.complete([{"role": "user", "content": "still serving"}], 4).generated_tokens > 0


def test_structured_outputs_keep_the_agent_to_the_protocol(tiny_engine):
    task = make_task(42, 0)
    agent = model_agent(tiny_engine, 64, task, SlidingWindow)
    for _ in range(3):
        thought, action = agent.act([{"role": "user", "content": task.prompt}])
        assert re.fullmatch(task.action_regex, action), action
    assert agent.usage["generated_tokens"] > 0 and agent.usage["cached_tokens"] is not None
    grammar = action_grammar("a|b", None)
    assert re.fullmatch(grammar, "Action: a") and re.fullmatch(grammar, "Thought: x\nAction: b")


def test_engine_refusal_runs_the_reactive_path_then_retries(tiny_engine, smol):
    # The loop's budget (3,000) is above the engine's window (2,048): a prompt between the two
    # passes our count, the engine refuses it, the policy drops a step and the call is retried.
    task = make_task(42, 0)
    policy = SlidingWindow(smol, 3000, task=task.prompt)
    for name in task.order[:3]:
        policy.observe(f"cat {name}", "alpha bravo " * 330)
    assert 2048 < smol.count_messages(policy.render()) <= 3000
    dropped = policy.first
    result = run_episode(policy, task, model_agent(tiny_engine, 16, task, policy), smol, 3000, max_calls=1)
    assert policy.first > dropped and not result["crashed"], result
    assert result["calls"] == 1 and result["trace"][0][0] == "agent"


def test_openai_backend_needs_an_address():
    with pytest.raises(ValueError, match="--base-url"):
        make_backend("openai")
    with pytest.raises(ValueError, match="unknown backend"):
        make_backend("tgi")


def test_bench_niah_with_the_model_agent_records_engine_figures(tmp_path, tiny_engine, smol):
    import json

    from arc_vllm.evaluation.bench import Setting
    from arc_vllm.evaluation.niah_bench import run

    out = tmp_path / "niah-model"
    summary = run(str(out), ["arc", "structured_state"], [42], 1, smol, settings=[Setting()],
                  context_window=2048, max_tokens=256, agent="model", backend=tiny_engine,
                  concurrency=2, agent_max_tokens=48, max_calls=6)
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert {row["method"] for row in rows} == {"arc", "structured_state"}
    for row in rows:
        assert row["agent"] == "model" and 0 < row["calls"] <= 6
        assert row["cached_tokens"] is not None and row["generated_tokens"] > 0
    assert summary["methods"]["arc"]["attempts"] == 1


def test_an_openai_backend_travels_to_ray_workers_without_its_connection():
    """``bench --ray ADDRESS`` ships the backend to workers: pickled without its HTTP client,
    it opens its own on arrival, to the same endpoint and model."""
    import pickle

    from arc_vllm.agent.backends import OpenAIBackend

    backend = OpenAIBackend("http://127.0.0.1:9/v1", model="served-model")
    copy = pickle.loads(pickle.dumps(backend))
    assert copy.client is not backend.client and str(copy.client.base_url) == "http://127.0.0.1:9/v1/"
    assert (copy.model, copy.temperature, copy.seed) == ("served-model", backend.temperature, backend.seed)
