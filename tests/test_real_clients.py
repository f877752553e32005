"""Real agent clients, unmodified, through `arc-vllm serve` on the embedded model: the PyPI
packages mini-swe-agent (its default text-based config, commands in its bubblewrap sandbox
without network), openai-agents (a function tool; on chat completions and on its default
Responses model) and the OpenAI client with native tool calls. Each runs at a 4k window, where
ARC compacts, and a 16k one, where the conversation fits (sessions of the shared 16k server,
``smol_server``, run concurrently so the engine batches them), and must get no error from ARC,
whatever the small model says.

SmolLM2's positions end at 8,192; the 16k server is allowed past that (the prompts here stay
far below it) so one engine serves both windows. float32 prefills faster on this CPU.
"""

import asyncio
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest


pytestmark = pytest.mark.slow
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
WINDOWS = (4096, 16384)  # a window ARC compacts in, and one the conversation fits
# Turns of the tool-calling clients: each adds a ~750-token tool result, so 7 turns pass the 4k
# window's 3,584-token budget (ARC compacts) and stay far inside the 16k one. The suite's
# largest cost was these prefills on SmolLM2 (issue 55); three turns more proved nothing more.
TURNS = 7


def each_window(run):
    with ThreadPoolExecutor(len(WINDOWS)) as pool:
        return dict(zip(WINDOWS, pool.map(run, WINDOWS)))


def test_mini_swe_agent_default_text_config(smol_server):
    import mini_swe_agent

    outcomes = each_window(lambda window: mini_swe_agent.run(smol_server.base, 10, window))
    for window, outcome in outcomes.items():
        assert outcome["model_calls"] == 10, window  # ten calls, every one answered
        assert outcome["exit"]["exit_status"] in ("LimitsExceeded", "Submitted")
        arc = outcome["arc"]
        assert arc["requests"] == 10 and arc["budgets"]["context_window"] == window
        # Its system prompt and instance template (~1,000 tokens with ARC's note) are F.
        assert arc["occurrences"] >= 9


def test_openai_agents_with_a_function_tool(smol_server):
    import openai_agents

    outcomes = each_window(lambda window: asyncio.run(openai_agents.run(smol_server.base, TURNS, window)))
    for window, outcome in outcomes.items():
        assert len(outcome["answers"]) == TURNS, window
        arc = outcome["arc"]
        assert arc["requests"] >= TURNS and arc["observations"] >= TURNS
    assert outcomes[4096]["arc"]["compactions"] >= 1  # 7 logs of ~750 tokens in 3,584


def test_openai_agents_default_responses_model(smol_server):
    """openai-agents' default model speaks the Responses API: the same agent, through ARC."""
    import openai_agents

    outcomes = each_window(lambda window: asyncio.run(openai_agents.run(smol_server.base, TURNS, window, responses=True)))
    for window, outcome in outcomes.items():
        assert len(outcome["answers"]) == TURNS, window
        arc = outcome["arc"]
        assert arc["requests"] >= TURNS and arc["observations"] >= TURNS and arc["rebases"] == 0
    assert outcomes[4096]["arc"]["compactions"] >= 1


def test_openai_client_with_native_tool_calls(smol_server):
    import openai_tools

    outcomes = each_window(lambda window: openai_tools.run(smol_server.base, TURNS, window))
    for window, outcome in outcomes.items():
        for arc in outcome["arc"]:
            assert arc["view_tokens"] <= arc["budget_tokens"] == window - 512
            if arc["engine_calls"] == 1:  # the engine counted exactly ARC's view, tools included
                assert arc["usage_prompt_tokens"] == arc["view_tokens"]
    assert sum(arc["compactions"] for arc in outcomes[4096]["arc"]) >= 1
