"""openai-agents, unmodified, through ARC: an ``Agent`` with a function tool, its
``AsyncOpenAI`` client pointed at ``arc-vllm serve`` with one default header,
``X-ARC-Session``, on ``OpenAIChatCompletionsModel`` (chat completions) or, with
``--responses``, on openai-agents' default model, ``OpenAIResponsesModel`` (the Responses
API: the whole input each turn, ARC's session continuing it). Tracing is off (it would
export to the internet). Native tool calls travel as tool calls both ways: the embedded model is served
with a Hermes-style tool template and vLLM's hermes parser.

Each turn the conversation grows by the agent's own items. A 135M model rarely calls the
tool itself, so every turn also carries a ``read_log`` call and its output, in
openai-agents' own item format (``function_call`` / ``function_call_output``), as if the
agent had called it: the history holds real tool calls and results whatever the model does.

Run (with ``make run`` serving on 127.0.0.1:8000):

    .venv/bin/python examples/openai_agents.py [--base-url URL] [--turns 10] [--window N] [--responses]
"""

from __future__ import annotations

import asyncio
import json
import sys

from arc_session import create_session, options, session_info


def log_lines(day: int) -> str:
    return "".join(f"2026-11-{day:02d} 10:{minute:02d} worker-{minute % 4} request ok in "
                   f"{(minute * 37 + day) % 900} ms\n" for minute in range(30))




async def run(base: str, turns: int, window: int | None = None, responses: bool = False) -> dict:
    from agents import (Agent, ModelSettings, OpenAIChatCompletionsModel, OpenAIResponsesModel, Runner,
                        function_tool)
    from agents import set_tracing_disabled
    from agents.exceptions import ModelBehaviorError
    from openai import AsyncOpenAI

    set_tracing_disabled(True)
    session = create_session(base, window)
    client = AsyncOpenAI(base_url=f"{base}/v1", api_key="none", max_retries=0,
                         default_headers={"X-ARC-Session": session})
    model_id = (await client.models.list()).data[0].id

    @function_tool
    def read_log(day: int) -> str:
        """Read the service log of one day of November."""
        return log_lines(day)

    model = (OpenAIResponsesModel if responses else OpenAIChatCompletionsModel)(model=model_id, openai_client=client)
    agent = Agent(name="log analyst", model=model,
                  instructions="You read service logs with read_log and report slow requests.",
                  tools=[read_log], model_settings=ModelSettings(max_tokens=32, temperature=0.0))
    items: list = []
    answers, tool_calls_by_model = [], 0
    for turn in range(1, turns + 1):
        items += [{"role": "user", "content": f"Day {turn}: any request slower than 800 ms?"},
                  {"type": "function_call", "call_id": f"call_day_{turn}", "name": "read_log",
                   "arguments": json.dumps({"day": turn})},
                  {"type": "function_call_output", "call_id": f"call_day_{turn}",
                   "output": log_lines(turn)}]
        try:
            result = await Runner.run(agent, items, max_turns=3)
        except ModelBehaviorError as error:
            # A small model's answer cut at max_tokens is an incomplete response, which
            # openai-agents' Responses model raises on: the turn is kept, without an answer.
            answers.append(f"(incomplete: {error})")
            continue
        tool_calls_by_model += sum(1 for item in result.new_items if item.type == "tool_call_item")
        answers.append(str(result.final_output))
        items = result.to_input_list()
    info = session_info(base, session)
    await client.close()
    return {"session": session, "answers": answers, "model_tool_calls": tool_calls_by_model,
            "arc": info}


def main() -> int:
    args = options(__doc__, flags={"--responses": "openai-agents' default model: the Responses API"})
    outcome = asyncio.run(run(args.base_url, args.turns, args.window, args.responses))
    for turn, answer in enumerate(outcome["answers"], 1):
        print(f"turn {turn}: {answer[:200]!r}")
    print(json.dumps({key: outcome[key] for key in ("session", "model_tool_calls", "arc")}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
