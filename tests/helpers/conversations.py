"""Conversations the serving tests send: a function-calling tool turn in OpenAI's form, the
`cat` tool, and the id the store gives an observation.

    turn, signature = tool_turn(3, "line\\n" * 100)   # assistant tool call + its tool result
"""

import hashlib
import json

TOOLS = [{"type": "function", "function": {
    "name": "cat", "description": "Print a file.",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                   "required": ["path"]}}}]


def visible_id(signature: str, observation: str) -> str:
    """The id the store shows for an observation (core/store.py): SHA1, first 8 hex."""
    return hashlib.sha1(signature.encode() + b"\x1f" + observation.encode()).hexdigest()[:8]


def tool_turn(index: int, body: str):
    """The ``index``-th `cat` call and its result ``body``; and the store's signature of it."""
    arguments = json.dumps({"path": f"log{index}.txt"})
    return [{"role": "assistant", "content": f"Reading log {index}.",
             "tool_calls": [{"id": f"call{index}", "type": "function",
                             "function": {"name": "cat", "arguments": arguments}}]},
            {"role": "tool", "tool_call_id": f"call{index}", "content": body}], f"cat({arguments})"
