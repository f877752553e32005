"""One agent step (``Turn``) and how it is written as chat messages in the recent suffix H.

A turn is a normal action with its stored observation (``obs_id``), or an ARC command with
the framework's response (``note``). It keeps the format the agent uses, so the model sees
its own conversation back:

    react  ARC's own protocol (the harness, replay):  assistant "thought\\nAction: a"
           + user "Observation:\\n..."
    chat   a client's text turns (mini-swe-agent, ReAct clients): the assistant's text and
           the following user (or system, developer) message, both as the client sent them
    tool   a native tool call: assistant ``tool_calls`` [{id, name, arguments}] + a
           ``role: tool`` message with its ``tool_call_id``; turns of one assistant message
           (parallel calls) share a ``group`` and are merged back into one message

Each turn has three forms, from largest to smallest: VERBATIM (the observation in full),
CITED (the observation as its citation stub, thought and action clipped) and MINIMAL (a bare
``§id`` and a 40-character action, at most ~200 tokens whatever the text; ArcConfig keeps
the recent budget above that). A human turn (``human``: the user's own words, never an id)
is shown in its CITED and MINIMAL forms by its head and stub line (``core/human_turns.py``
writes them), in the user message it was. An assistant message's ``reasoning`` is stored apart
(``thinking_id``) and shown as its context decides (``core/thinking.py``: whole, as its stub, or
not), in any form: the caller passes the text. Run ``python -m arc_vllm.core.turn`` for an example.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from arc_vllm.core import formats

VERBATIM, CITED, MINIMAL = 0, 1, 2
REACT, CHAT, TOOL = "react", "chat", "tool"
MINIMAL_ACTION_CHARS = 40      # the action in a turn's smallest form
NOTE_CHARS = 400               # an ARC command's response in a cited turn
TOOL_NAME_CHARS = 64


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str   # the JSON text the model produced, kept as sent


@dataclass(frozen=True)
class Turn:
    step: int
    thought: str
    action: str
    obs_id: str | None = None
    note: str | None = None
    style: str = REACT
    call: ToolCall | None = None
    group: int | None = None   # tool turns of one assistant message share it
    role: str = "user"         # a chat turn's observation message (user, system, developer)
    reasoning: str = ""        # the assistant message's reasoning, as the client sent it
    human: bool = False        # a chat turn whose user message is the human's (``core/transcript.py``)
    thinking_id: str | None = None  # the stored ``reasoning`` (``core/thinking.py``)

    @classmethod
    def of_state(cls, data: dict) -> "Turn":
        """A turn from its snapshot form (``state``), its tool call rebuilt."""
        call = data.get("call")
        return cls(**{**data, "call": ToolCall(**call) if call else None})

    def state(self) -> dict:
        """Its snapshot form: ``dataclasses.asdict`` without ``human`` where it is False and
        ``thinking_id`` where there is none (a snapshot of a conversation without them reads as
        it did before they existed)."""
        data = asdict(self)
        if not self.human:
            del data["human"]
        if self.thinking_id is None:
            del data["thinking_id"]
        return data


def clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:max(0, limit - 1)] + "…"


def clipped_arguments(arguments: str, limit: int) -> str:
    """Tool-call arguments shortened to at most ``limit`` characters of still-valid JSON."""
    if len(arguments) <= limit:
        return arguments
    return json.dumps({formats.CLIPPED_ARGUMENTS_KEY: clip(arguments, limit)}, ensure_ascii=False)


def turn_messages(turn: Turn, form: int, *, observation: str, stub: str, config, thinking: str = "") -> list[dict]:
    """``turn`` as chat messages in ``form``. ``observation`` is the stored body (VERBATIM),
    ``stub`` its citation stub (CITED) or bare ``§id`` reference (MINIMAL); of a human turn,
    its head and stub line (CITED, MINIMAL), shown as the user message. ``thinking``: the
    assistant message's reasoning as shown ('' for none)."""
    if form == VERBATIM:
        thought, action, note = turn.thought, turn.action, turn.note
        arguments = turn.call.arguments if turn.call else ""
    elif form == CITED:
        thought, action = clip(turn.thought, config.thought_chars), clip(turn.action, config.action_chars)
        note = turn.note and clip(turn.note, NOTE_CHARS)
        arguments = turn.call and clipped_arguments(turn.call.arguments, config.action_chars)
    else:
        thought, action = "", clip(turn.action, MINIMAL_ACTION_CHARS)
        note = turn.note and clip(turn.note, MINIMAL_ACTION_CHARS)
        arguments = turn.call and clipped_arguments(turn.call.arguments, MINIMAL_ACTION_CHARS)
    if turn.obs_id is None:
        result = formats.command_response(note or "")
    elif form == VERBATIM:
        result = observation
    elif turn.human:
        result = stub
    elif form == CITED:
        result = formats.cited_observation(stub)
    else:
        result = formats.minimal_observation(turn.step, turn.obs_id)
    reasoning = {"reasoning": thinking} if thinking else {}
    if turn.style == TOOL and turn.call is not None:
        call = {"id": turn.call.id, "type": "function",
                "function": {"name": turn.call.name[:TOOL_NAME_CHARS], "arguments": arguments}}
        tool = {"role": "tool", "tool_call_id": turn.call.id, "content": result}
        return [{"role": "assistant", "content": thought, "tool_calls": [call], **reasoning}, tool]
    if turn.style == CHAT:
        messages = ([{"role": "assistant", "content": action, **reasoning}]
                    if action or reasoning or turn.obs_id is None else [])
        return messages + [{"role": turn.role if turn.obs_id is not None else "user", "content": result}]
    shown = result if turn.obs_id is None else formats.observation_block(result, form == VERBATIM)
    return [{"role": "assistant", "content": formats.react_action(thought, action)},
            {"role": "user", "content": shown}]


def merge_groups(turns: list[Turn], per_turn: list[list[dict]]) -> list[dict]:
    """Concatenate the turns' messages, putting the tool calls of one assistant message back
    together: [assistant(a), tool(a)], [assistant(b), tool(b)] of one group become
    [assistant(a, b), tool(a), tool(b)]. Cached message dicts are never modified."""
    messages: list[dict] = []
    open_group, open_index = None, None
    for turn, pieces in zip(turns, per_turn):
        if (turn.group is not None and turn.group == open_group and pieces
                and pieces[0].get("tool_calls")):
            merged = dict(messages[open_index])
            merged["tool_calls"] = merged["tool_calls"] + pieces[0]["tool_calls"]
            messages[open_index] = merged
            messages.extend(pieces[1:])
            continue
        if turn.group is not None and pieces and pieces[0].get("tool_calls"):
            open_group, open_index = turn.group, len(messages)
        else:
            open_group, open_index = None, None
        messages.extend(pieces)
    return messages


if __name__ == "__main__":
    from arc_vllm.core.config import ArcConfig

    config = ArcConfig()
    a = Turn(1, "Two files.", 'cat({"path": "a"})', "1f3a9c0d", style=TOOL,
             call=ToolCall("c1", "cat", '{"path": "a"}'), group=1)
    b = Turn(2, "", 'cat({"path": "b"})', "2b4c6d8e", style=TOOL,
             call=ToolCall("c2", "cat", '{"path": "b"}'), group=1)
    pieces = [turn_messages(a, VERBATIM, observation="alpha", stub="", config=config),
              turn_messages(b, CITED, observation="beta", stub="§2b4c6d8e · cat ...", config=config)]
    for message in merge_groups([a, b], pieces):
        print(message)
