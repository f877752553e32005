"""Real agent clients, unmodified, through `arc-vllm serve` on the embedded model: the PyPI
packages mini-swe-agent (its default text-based config, commands in its bubblewrap sandbox
without network), openai-agents (a function tool; on chat completions and on its default
Responses model) and the OpenAI client with native tool calls. Each runs at a 4k window, where
ARC compacts the tool clients' conversations, and a 16k one, where the conversation fits
(sessions of the shared 16k server,
``smol_server``): all eight runs at once, so the engine batches them, and each must get no
error from ARC, whatever the small model says.

SmolLM2's positions end at 8,192; the 16k server is allowed past that (the prompts here stay
far below it) so one engine serves both windows. float32 prefills faster on this CPU.
"""

import asyncio
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest


pytestmark = [pytest.mark.slow, pytest.mark.memory(3)]  # eight client runs at once
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
WINDOWS = (4096, 16384)  # a window ARC compacts in, and one the conversation fits
# Turns of the tool-calling clients per window: each adds a ~750-token tool result, so 7 turns
# pass the 4k window's 3,584-token budget (ARC compacts), and 4 fit the 16k one whole. The
# suite's largest cost was these prefills on SmolLM2 (issue 55): more turns proved nothing more.
TURNS = {4096: 7, 16384: 4}
# mini-swe-agent's model calls: SmolLM2 fills each one's 96 tokens, and those decodes, one call
# after another, were the eight runs' longest chain (229 s with 10 calls; 6 end with the others).
STEPS = 6


def mini_swe_agent_run(base: str, window: int) -> dict:
    import mini_swe_agent

    return mini_swe_agent.run(base, STEPS, window)


def openai_agents_run(base: str, window: int, responses: bool = False) -> dict:
    import openai_agents

    return asyncio.run(openai_agents.run(base, TURNS[window], window, responses=responses))


def openai_tools_run(base: str, window: int) -> dict:
    import openai_tools

    return openai_tools.run(base, TURNS[window], window)


CLIENTS = {"mini-swe-agent": mini_swe_agent_run, "openai-agents": openai_agents_run,
           "openai-agents responses": lambda base, window: openai_agents_run(base, window, responses=True),
           "openai tools": openai_tools_run}


@pytest.fixture(scope="module")
def outcomes(smol_server):
    """Every client at every window at once, as agents share a server: the engine batches their
    decodes, and one client's own work (litellm, the sandbox's commands) overlaps the others'
    model calls. The clients' packages are imported first: threads must not race to import
    them. A client that raised raises again in its own test."""
    import agents  # noqa: F401
    import litellm  # noqa: F401
    import mini_swe_agent  # noqa: F401
    import minisweagent.agents.default  # noqa: F401
    import minisweagent.models.litellm_textbased_model  # noqa: F401
    import openai_agents  # noqa: F401
    import openai_tools  # noqa: F401

    runs = [(name, window) for name in CLIENTS for window in WINDOWS]
    with ThreadPoolExecutor(len(runs)) as pool:
        futures = {run: pool.submit(CLIENTS[run[0]], smol_server.base, run[1]) for run in runs}
        return {run: future.exception() or future.result() for run, future in futures.items()}


def each_window(outcomes, name: str) -> dict:
    results = {window: outcomes[name, window] for window in WINDOWS}
    for outcome in results.values():
        if isinstance(outcome, BaseException):
            raise outcome
    return results


def test_mini_swe_agent_default_text_config(outcomes):
    for window, outcome in each_window(outcomes, "mini-swe-agent").items():
        assert outcome["model_calls"] == STEPS, window  # every call answered
        assert outcome["exit"]["exit_status"] in ("LimitsExceeded", "Submitted")
        arc = outcome["arc"]
        assert arc["requests"] == STEPS and arc["budgets"]["context_window"] == window
        # Its system prompt and instance template (~1,000 tokens with ARC's note) are F.
        assert arc["occurrences"] >= STEPS - 1


def test_openai_agents_with_a_function_tool(outcomes):
    results = each_window(outcomes, "openai-agents")
    for window, outcome in results.items():
        assert len(outcome["answers"]) == TURNS[window], window
        arc = outcome["arc"]
        assert arc["requests"] >= TURNS[window] and arc["observations"] >= TURNS[window]
    assert results[4096]["arc"]["compactions"] >= 1  # 7 logs of ~750 tokens in 3,584


def test_openai_agents_default_responses_model(outcomes):
    """openai-agents' default model speaks the Responses API: the same agent, through ARC."""
    results = each_window(outcomes, "openai-agents responses")
    for window, outcome in results.items():
        assert len(outcome["answers"]) == TURNS[window], window
        arc = outcome["arc"]
        assert arc["requests"] >= TURNS[window] and arc["observations"] >= TURNS[window] and arc["rebases"] == 0
    assert results[4096]["arc"]["compactions"] >= 1


def test_openai_client_with_native_tool_calls(outcomes):
    results = each_window(outcomes, "openai tools")
    for window, outcome in results.items():
        for arc in outcome["arc"]:
            assert arc["view_tokens"] <= arc["budget_tokens"] == window - 512
            if arc["engine_calls"] == 1:  # the engine counted exactly ARC's view, tools included
                assert arc["usage_prompt_tokens"] == arc["view_tokens"]
    assert sum(arc["compactions"] for arc in results[4096]["arc"]) >= 1
