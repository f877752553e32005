"""The plain OpenAI client with native tool calls through ARC: ``tools`` in every request,
the model's ``tool_calls`` executed and answered with ``role: tool`` messages, the whole
conversation resent each turn (as function-calling agents do), one ``X-ARC-Session`` header.

When the model answers in prose instead of calling ``cat`` (a 135M model mostly does), the
script makes the call itself, so the history always holds real tool calls and results.

Run (with ``make run`` serving on 127.0.0.1:8000):

    .venv/bin/python examples/openai_tools.py [--base-url URL] [--turns 10] [--window N]
"""

from __future__ import annotations

import json
import sys

from arc_session import create_session, options

TOOLS = [{"type": "function", "function": {
    "name": "cat", "description": "Print a file of the project.",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                   "required": ["path"]}}}]


def read(path: str) -> str:
    return "".join(f"{path}:{n}: value = {n * n % 97}\n" for n in range(60))




def run(base: str, turns: int, window: int | None = None) -> dict:
    from openai import OpenAI

    session = create_session(base, window)
    client = OpenAI(base_url=f"{base}/v1", api_key="none", max_retries=0,
                    default_headers={"X-ARC-Session": session})
    model = client.models.list().data[0].id
    messages = [{"role": "system", "content": "You inspect files with the cat tool."},
                {"role": "user", "content": "Read config_1.txt to config_10.txt and sum the values."}]
    arcs, model_calls = [], 0
    for turn in range(1, turns + 1):
        response = client.chat.completions.create(model=model, messages=messages, tools=TOOLS,
                                                  max_tokens=32, temperature=0.0)
        arcs.append(dict(response.model_extra["arc"], usage_prompt_tokens=response.usage.prompt_tokens))
        message = response.choices[0].message
        calls = [(call.id, call.function.arguments) for call in message.tool_calls or []
                 if call.function.name == "cat"]
        if calls:
            model_calls += len(calls)
            messages.append(message.model_dump(exclude_none=True))
        else:  # the client's own move: read the next file
            if message.content:
                messages.append({"role": "assistant", "content": message.content})
            calls = [(f"call_{turn}", json.dumps({"path": f"config_{turn}.txt"}))]
            messages.append({"role": "assistant", "content": None, "tool_calls": [
                {"id": calls[0][0], "type": "function",
                 "function": {"name": "cat", "arguments": calls[0][1]}}]})
        for call_id, arguments in calls:
            try:
                path = json.loads(arguments or "{}").get("path", "")
            except (json.JSONDecodeError, AttributeError):
                path = ""
            messages.append({"role": "tool", "tool_call_id": call_id, "content": read(str(path))})
    return {"session": session, "arc": arcs, "model_tool_calls": model_calls}


def main() -> int:
    args = options(__doc__)
    outcome = run(args.base_url, args.turns, args.window)
    for turn, arc in enumerate(outcome["arc"], 1):
        print(f"turn {turn}: view {arc['view_tokens']} of {arc['budget_tokens']} tokens, "
              f"compactions {arc['compactions']}, cached {arc['prefix_cached_tokens']}")
    print(f"session {outcome['session']}: {outcome['model_tool_calls']} tool calls by the model")
    return 0


if __name__ == "__main__":
    sys.exit(main())
