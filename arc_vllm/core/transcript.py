"""From OpenAI chat messages to ARC steps, without archiving anything twice.

Clients of an OpenAI-compatible server usually resend the whole conversation on every
request. A session remembers a fingerprint of every message it has taken in; a request whose
messages start with those fingerprints contributes only what follows them. A request whose
first message is not the session's first is taken as carrying new messages only.

Mapping (each step keeps the client's own format, so the view can give it back):

- the system/developer messages and the user messages before the first assistant message
  are the task prefix F, kept as messages (fixed at the session's first request);
- an assistant message with ``tool_calls`` opens one step per call (style ``tool``, one
  ``group`` for the message); the ``role: tool`` message with the matching
  ``tool_call_id`` is that step's observation; its signature is ``name(arguments)``;
- an assistant text message and the user message after it are one step (style ``chat``):
  the assistant's text is the action, the user's message what followed it; a user message
  with no assistant text before it is a step with an empty action. A ``system`` or
  ``developer`` message later in the conversation (Claude Code's reminders) is such a step
  too, and keeps its role in the view;
- an assistant message's ``reasoning`` (what vLLM makes of Anthropic ``thinking`` blocks and
  Responses ``reasoning`` items) goes with its step and is shown as sent.

A human turn is not an observation. Who wrote a user message depends on the protocol:

- a conversation with native tool calls (``native``: tools offered, or a ``tool_calls`` /
  ``role: tool`` message anywhere in it; Claude Code, Codex, openai-agents, any chat client
  with ``tools``) gets its tool results as ``role: tool`` messages, so a user message there is
  the human speaking: a **human turn** (``Step.human``), stored like every observation but
  never reduced to an id in a view (``core/human_turns.py``). vLLM's Anthropic converter puts
  the text blocks of a user message that also holds ``tool_result`` blocks into a user message
  after the tool messages, so the words a person typed while a tool ran are a human turn too;
- a text-protocol conversation (no native tools: mini-swe-agent, ReAct agents) gets its
  command output as user messages: the user message after an assistant action is that step's
  observation, cited like any other;
- client context is not the human's words: a user message whose text is only blocks a client
  injects (``CLIENT_CONTEXT``: Claude Code's ``<system-reminder>``, which its own system prompt
  says "are injected by the harness, not the user", and its command output blocks; Codex's
  ``<environment_context>``, AGENTS.md instructions and the other fragments its compaction
  leaves out of the user's messages) stays a step that compaction may cite. A message mixing
  both is a human turn; its head, when shortened, is taken from the human's words only
  (``human_words``).

Null or missing content is an empty string; list content is read as vLLM reads it for a
string-content template: the text parts (``text``, ``input_text``, ``output_text``,
``refusal``, ``thinking``) joined by newlines. Roles, in F too, are kept as sent. Run ``python -m arc_vllm.core.transcript``
for an example.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field

from arc_vllm.core.turn import CHAT, REACT, TOOL, ToolCall


def fingerprint(message: dict) -> str:
    canonical = json.dumps(message, sort_keys=True, ensure_ascii=False, default=str)
    # Any JSON a client sends has a fingerprint (a lone surrogate too: the 400 for it is the
    # validation's, in the API's own form, not an encoding error here).
    return hashlib.sha1(canonical.encode("utf-8", "surrogatepass")).hexdigest()[:16]


# The content parts vLLM reads as text (``renderers/chat_utils.TEXT_PART_TYPES``).
TEXT_PART_TYPES = frozenset({"text", "input_text", "output_text", "refusal", "thinking"})

# Blocks a client writes into user messages that are not the human's words, read from the
# real CLIs (the strings in Claude Code 2.1.328's binary; Codex's contextual user fragments,
# ``codex-rs/core/src/context``). Claude Code: reminders, the output of local commands and of
# ``!`` shell commands (``<bash-input>``, the command a person typed, is theirs), background
# task notifications, hook output. Codex: the environment, AGENTS.md and skill instructions,
# a shell command's output, an aborted turn's note, sub-agent notifications.
CLIENT_CONTEXT_TAGS = ("system-reminder", "local-command-caveat", "local-command-stdout", "local-command-stderr",
                       "bash-stdout", "bash-stderr", "task-notification", "user-prompt-submit-hook",
                       "environment_context", "user_instructions", "skill", "user_shell_command", "turn_aborted",
                       "subagent_notification")
CLIENT_CONTEXT = re.compile(
    "|".join(rf"<{re.escape(tag)}>.*?</{re.escape(tag)}>" for tag in CLIENT_CONTEXT_TAGS)
    + r"|# AGENTS\.md instructions for [^\n]*\n+<INSTRUCTIONS>.*?</INSTRUCTIONS>",
    re.DOTALL | re.IGNORECASE)
HUMAN_SIGNATURE = "user message"  # the store's signature of a human turn (what its stub names)


def human_words(text: str) -> str:
    """``text`` without the client-context blocks in it (``CLIENT_CONTEXT``), stripped: what a
    person wrote. Empty for a message that is client context only."""
    return CLIENT_CONTEXT.sub("", text).strip() if "<" in text or "# AGENTS" in text else text.strip()


def is_native(messages: list[dict]) -> bool:
    """Whether ``messages`` hold a native tool call or result (the conversation's tool results
    come as ``role: tool`` messages, not as user messages)."""
    return any(message.get("tool_calls") or message.get("role") == "tool" for message in messages)


def content_text(message: dict, where: str = "messages") -> str:
    """A message's text; list content (text parts) joined by newlines, as vLLM does;
    anything else is a 400."""
    content = message.get("content")
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if not isinstance(part, dict) or part.get("type", "text") not in TEXT_PART_TYPES \
                    or not isinstance(part.get("text", part.get("refusal")), str):
                raise ValueError(f"{where}.content: only text content parts are supported by "
                                 "ARC sessions")
            parts.append(part.get("text", part.get("refusal")))
        return "\n".join(parts)  # as vLLM joins text parts for a string-content template
    raise ValueError(f"{where}.content: must be a string, a list of text parts or null")


def text_or_empty(value, where: str) -> str:
    """A field that is text or null: the text, or "" for null; a ValueError naming ``where``
    otherwise (what every reader of agents' messages and logs takes a text field as)."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ValueError(f"{where}: must be a string or null, not {type(value).__name__}")
    return value


def reasoning_of(message: dict, where: str) -> str:
    """An assistant message's ``reasoning`` (vLLM's field; ``reasoning_content`` is its alias)."""
    return text_or_empty(message.get("reasoning", message.get("reasoning_content")), f"{where}.reasoning")


def tool_call_of(call, where: str) -> ToolCall:
    if not isinstance(call, dict) or not isinstance(call.get("function"), dict):
        raise ValueError(f"{where}: a tool call must be an object with a function")
    function = call["function"]
    arguments = function.get("arguments")
    if isinstance(arguments, dict):
        arguments = json.dumps(arguments, ensure_ascii=False)
    name = function.get("name")
    if not isinstance(name, str) or not name:
        raise ValueError(f"{where}.function.name: a non-empty string is required")
    return ToolCall(str(call.get("id") or ""), name, arguments if isinstance(arguments, str) else "")


def call_signature(call: ToolCall) -> str:
    return f"{call.name}({call.arguments})"


@dataclass(frozen=True)
class Step:
    """One observation to archive, in the format the agent wrote it (``core/turn.py``)."""

    action: str
    observation: str
    thought: str = ""
    returncode: int | None = None
    style: str = REACT
    call: ToolCall | None = None
    signature: str | None = None     # the store's action signature, when not the action
    group: int | None = None         # tool calls of one assistant message
    role: str = "user"               # a chat step's observation message: user, system, developer
    reasoning: str = ""              # the assistant message's reasoning, as sent
    human: bool = False              # the observation is a human turn: the user's own words


@dataclass
class NewItems:
    prefix: list[dict]               # the task prefix, when this request establishes it
    steps: list[Step]                # the observations to archive, in order
    fingerprints: list[str]          # of every message taken in, in order
    new_messages: list[dict] = field(default_factory=list)  # the new messages after F
    native: bool = False             # the conversation has native tool calls (as far as seen)


def split_prefix(messages: list[dict]) -> tuple[list[dict], list[dict]]:
    """(system + leading user messages, the rest)."""
    index = 0
    while index < len(messages) and messages[index].get("role") in ("system", "developer", "user"):
        index += 1
    return messages[:index], messages[index:]


def fingerprints(messages: list[dict]) -> list[str]:
    return [fingerprint(message) for message in messages]


def common_prefix(items: list, known: list) -> int:
    """How many leading items of ``items`` equal ``known``'s, compared by value. One C-level
    comparison when ``items`` extends ``known`` (a conversation resent whole), so a client that
    resends its history pays no Python work per message it has sent before."""
    shared = min(len(items), len(known))
    if items[:shared] == known[:shared]:
        return shared
    same = 0
    while items[same] == known[same]:
        same += 1
    return same


def first_new(prints: list[str], known: list[str], held: int = 0) -> int | None:
    """Where the new messages start in a conversation whose fingerprints are ``prints`` (its
    first ``held`` those of a handle's, ``known[:held]``), for a session that took ``known`` in:
    past what both share, and past what the handle stands for. None: the conversation does not
    start as the session's did (all of it is new)."""
    if not known or prints[:1] != known[:1]:
        return None
    return max(common_prefix(prints, known), held)


def take_in(messages: list[dict], known: list[str], has_prefix: bool, prints: list[str] | None = None,
            held: int = 0, native: bool = False) -> NewItems:
    """What in ``messages`` is new for a session that has taken in ``known``. ``held``: the
    request stands for the session's first ``held`` messages before its own (a compaction
    handle), so ``prints`` (when given: of the whole conversation, ``known[:held]`` first)
    starts with them. ``native``: the conversation is known to have native tool calls (tools
    offered, or seen in an earlier request); a tool call among the new messages makes it so
    too, and its user messages are then human turns."""
    prints = known[:held] + fingerprints(messages) if prints is None else prints
    same = first_new(prints, known, held)
    if same is not None:
        fresh, start = messages[same - held:], same
        taken = known[:same] + prints[same:] if same == len(known) else known + prints[same:]
    else:
        fresh, start, taken = messages, held, known + prints[held:]
    prefix: list[dict] = []
    if not has_prefix:
        prefix, fresh = split_prefix(fresh)
        prefix = [{"role": message["role"], "content": content_text(message, f"messages[{index - held}]")}
                  for index, message in enumerate(prefix, start=start)]
        start += len(prefix)
    native = native or is_native(fresh)
    steps = []
    pending: dict[str, tuple[ToolCall, str, int, str]] = {}  # id -> (call, thought, group, reasoning)
    text_action = None   # the assistant text awaiting its user message
    text_reasoning = ""
    for index, message in enumerate(fresh, start=start):
        role = message.get("role")
        where = f"messages[{index - held}]"
        if role == "assistant":
            text = content_text(message, where)
            reasoning = reasoning_of(message, where)
            calls = message.get("tool_calls") or []
            if not isinstance(calls, list):
                raise ValueError(f"{where}.tool_calls: must be a list")
            text_action, text_reasoning = (None, "") if calls else (text, reasoning)
            # One group per assistant message, from its fingerprint: unique across requests
            # even when a client sends only its new messages.
            group = int(prints[index], 16)
            for number, raw in enumerate(calls):
                call = tool_call_of(raw, f"{where}.tool_calls[{number}]")
                # The thought belongs to the message: shown once, with its first call.
                pending[call.id] = (call, text if number == 0 else "", group,
                                    reasoning if number == 0 else "")
        elif role == "tool":
            call_id = message.get("tool_call_id")
            if call_id in pending:
                call, thought, group, reasoning = pending.pop(call_id)
            else:  # a result without its call: shown as a call of the tool it names
                call = ToolCall(str(call_id or ""), str(message.get("name") or "tool"), "{}")
                thought, group, reasoning = "", None, ""
            steps.append(Step(call_signature(call), content_text(message, where), thought,
                              style=TOOL, call=call, group=group, reasoning=reasoning))
        elif role in ("user", "system", "developer"):
            text = content_text(message, where)
            human = native and role == "user" and is_human(message, text)
            steps.append(Step(text_action or "", text, style=CHAT, role=role, reasoning=text_reasoning,
                              human=human, signature=HUMAN_SIGNATURE if human else None))
            text_action, text_reasoning = None, ""
        else:
            raise ValueError(f"{where}.role: unknown role {role!r}")
    return NewItems(prefix, steps, taken, fresh, native)


def is_human(message: dict, text: str) -> bool:
    """Whether a user message of a native conversation holds words of the human's: some text
    part that is not client context only (list content is judged part by part, as a client
    sends its blocks)."""
    content = message.get("content")
    if isinstance(content, list):
        return any(human_words(part.get("text", part.get("refusal")) or "") for part in content)
    return bool(human_words(text))


if __name__ == "__main__":
    conversation = [
        {"role": "system", "content": "You are an agent."},
        {"role": "user", "content": "Find the needle."},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "cat", "arguments": "{\"path\": \"a\"}"}},
            {"id": "c2", "type": "function", "function": {"name": "cat", "arguments": "{\"path\": \"b\"}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "NEEDLE=ABC"},
        {"role": "tool", "tool_call_id": "c2", "content": None},
    ]
    first = take_in(conversation, [], has_prefix=False)
    print(first.prefix, *first.steps, sep="\n")
    again = take_in(conversation + [{"role": "assistant", "content": "ls"},
                                    {"role": "user", "content": "a b"}], first.fingerprints, True,
                    native=first.native)
    print(*again.steps, sep="\n")
    # With native tool calls, a user message is the human speaking (a client reminder is not):
    human = take_in(conversation + [{"role": "user", "content": [
        {"type": "text", "text": "<system-reminder>files changed</system-reminder>"},
        {"type": "text", "text": "Never touch prod.yaml."}]}], first.fingerprints, True, native=first.native)
    print(*human.steps, sep="\n")
