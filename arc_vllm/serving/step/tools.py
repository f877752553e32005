"""ARC's commands as tools: offered beside a request's own tools, served inside the server.

    ARC_TOOLS                       _recall(id, chunk?), _recall_meta(id), _catalog(page?)
    serve_commands(context, msg)    the commands of one model output, served (tool calls are
                                    answered by a tool message holding the result; text
                                    commands by ARC's reply, the recalled text in U)
    strip_arc_calls(response)       ARC's tool calls never reach the client

A tool call becomes a ``Command`` object directly (``command_of_call``); text goes through
the one grammar (``core/commands.py``). Run ``python -m arc_vllm.serving.step.tools`` to print
the command of a sample call.
"""

from __future__ import annotations

import json

from arc_vllm.core.commands import COMMANDS, InvalidCommand, command_of, parse_commands
from arc_vllm.core.transcript import call_signature, tool_call_of
from arc_vllm.core.turn import CHAT, TOOL

# The tools are the command set of core/commands.py, as function schemas.
ARC_TOOLS = [{"type": "function", "function": {"name": spec.word, "description": spec.description,
                                               "parameters": spec.parameters}} for spec in COMMANDS]
ARC_TOOL_NAMES = {tool["function"]["name"] for tool in ARC_TOOLS}


def command_of_call(name: str, arguments: str):
    """The ARC command of one tool call (an ``InvalidCommand`` for bad arguments): its JSON
    arguments read here, their values checked by the grammar's one owner (``commands.command_of``)."""
    try:
        values = json.loads(arguments or "{}")
    except json.JSONDecodeError:
        values = None
    text = f"{name}({arguments})"
    if not isinstance(values, dict):
        return InvalidCommand(text, "arguments must be a JSON object")
    return command_of(name, values, text)


def serve_commands(context, message) -> list:
    """Serve the ARC commands of one model output; their results (empty: none in it). What the
    model thought before them (its ``reasoning``) is stored and shown with them, so the next
    generation sees the thinking of its own loop."""
    calls = [call for call in (message.tool_calls or []) if call.function.name in ARC_TOOL_NAMES]
    reasoning = message.reasoning or ""
    results = []
    if calls:
        group = -(context.step + 1)  # unique: never merged with a client message's calls
        for call in calls:
            tool_call = tool_call_of(call.model_dump(), "tool_calls")
            command = command_of_call(tool_call.name, tool_call.arguments)
            # The thought goes with the first call of the message, as for the client's calls.
            first = call is calls[0]
            results += context.act(call_signature(tool_call), commands=[command], style=TOOL,
                                   call=tool_call, group=group, inline=True,
                                   thought=(message.content or "") if first else "",
                                   reasoning=reasoning if first else "")
        return results
    text = message.content or ""
    commands = parse_commands(text)
    return context.act(text, commands=commands, style=CHAT, reasoning=reasoning) if commands else []


def strip_arc_calls(response: dict) -> None:
    """ARC's own tool calls never reach the client (it does not know those tools): after r
    served commands, any left in the final message are dropped."""
    message = response["choices"][0].get("message") or {}
    calls = message.get("tool_calls") or []
    kept = [call for call in calls if call.get("function", {}).get("name") not in ARC_TOOL_NAMES]
    if len(kept) == len(calls):
        return
    if kept:
        message["tool_calls"] = kept
    else:
        message.pop("tool_calls", None)
        message["content"] = message.get("content") or ""
        if response["choices"][0].get("finish_reason") == "tool_calls":
            response["choices"][0]["finish_reason"] = "stop"


if __name__ == "__main__":
    print(command_of_call("_recall", '{"id": "§1f3a9c0d", "chunk": 2}'))
    print(command_of_call("_catalog", "{}"))
