"""From OpenAI chat messages to ARC turns, without archiving anything twice.

Clients of an OpenAI-compatible server usually resend the whole conversation on every
request. A session remembers a fingerprint of every message it has taken in; a request whose
messages start with those fingerprints contributes only what follows them. A request whose
first message is not the session's first is taken as carrying new messages only.

Mapping: system messages and the user messages before the first assistant message are the
task prefix F (fixed at the session's first request); an assistant message is a thought plus
an action (its tool calls, rendered as ``name(arguments)``, else its text); a tool message is
the observation of the matching tool call; a later user message is an observation with the
signature ``user``.

Run ``python -m arc_vllm.serving.transcript`` for an example.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass


def fingerprint(message: dict) -> str:
    canonical = json.dumps(message, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha1(canonical.encode()).hexdigest()[:16]


def content_text(message: dict, field: str = "messages") -> str:
    """A message's text; list content (OpenAI parts) joined; anything else is a 400."""
    content = message.get("content")
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                raise ValueError(f"{field}: only text content parts are supported by ARC sessions")
            parts.append(part["text"])
        return "".join(parts)
    raise ValueError(f"{field}: content must be a string or a list of text parts")


def action_of(message: dict) -> str:
    calls = message.get("tool_calls") or []
    rendered = []
    for call in calls:
        function = call.get("function") or {}
        rendered.append(f"{function.get('name', '?')}({function.get('arguments', '')})")
    return "\n".join(rendered) if rendered else content_text(message)


@dataclass
class NewItems:
    prefix: list[dict]               # the task prefix, when this request establishes it
    events: list[tuple]              # ("observe", action, observation, thought) in order
    fingerprints: list[str]          # of every message taken in, in order
    new_messages: list[dict]         # the messages after the prefix that are new


def message_text(message: dict) -> str:
    """A message as plain text for size accounting: its text, or its tool calls."""
    return action_of(message) if message.get("tool_calls") else content_text(message)


def split_prefix(messages: list[dict]) -> tuple[list[dict], list[dict]]:
    """(system + leading user messages, the rest)."""
    index = 0
    while index < len(messages) and messages[index].get("role") in ("system", "developer", "user"):
        index += 1
    return messages[:index], messages[index:]


def take_in(messages: list[dict], known: list[str], has_prefix: bool) -> NewItems:
    """What in ``messages`` is new for a session that has taken in ``known``."""
    prints = [fingerprint(message) for message in messages]
    if known and prints[:1] == known[:1]:
        same = 0
        while same < min(len(known), len(prints)) and prints[same] == known[same]:
            same += 1
        fresh, start = messages[same:], same
        taken = known[:same] + prints[same:] if same == len(known) else known + prints[same:]
    else:
        fresh, start, taken = messages, 0, known + prints
    prefix: list[dict] = []
    if not has_prefix:
        prefix, fresh = split_prefix(fresh)
        prefix = [{"role": message["role"], "content": content_text(message, f"messages[{index}]")}
                  for index, message in enumerate(prefix, start=start)]
        start += len(prefix)
    events = []
    pending = {}      # tool_call_id -> (action, thought)
    last_action = ("", "")
    for index, message in enumerate(fresh, start=start):
        role = message.get("role")
        where = f"messages[{index}]"
        if role == "assistant":
            thought = content_text(message, where) if message.get("tool_calls") else ""
            last_action = (action_of(message), thought)
            for call in message.get("tool_calls") or []:
                function = call.get("function") or {}
                pending[call.get("id")] = (f"{function.get('name', '?')}({function.get('arguments', '')})",
                                           thought)
        elif role == "tool":
            action, thought = pending.pop(message.get("tool_call_id"), last_action)
            events.append(("observe", action or "tool", content_text(message, where), thought))
        elif role in ("user", "system", "developer"):
            events.append(("observe", role, content_text(message, where), ""))
        else:
            raise ValueError(f"{where}.role: unknown role {role!r}")
    return NewItems(prefix, events, taken, fresh)


if __name__ == "__main__":
    conversation = [
        {"role": "system", "content": "You are an agent."},
        {"role": "user", "content": "Find the needle."},
        {"role": "assistant", "content": "Reading.", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "cat", "arguments": "{\"path\": \"secrets.txt\"}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "NEEDLE=ABC"},
    ]
    first = take_in(conversation, [], has_prefix=False)
    print(first.prefix, first.events)
    again = take_in(conversation + [{"role": "user", "content": "go on"}], first.fingerprints, True)
    print(again.events)
