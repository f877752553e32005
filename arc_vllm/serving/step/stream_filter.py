"""What of a streamed generation may reach the client now: everything but a possible ARC command.

ARC serves a command inside the server and generates again, so the client must never see one.
A streamed generation is released delta by delta, holding back only

- text of the current line while it could still be a command line: after leading spaces and
  backticks, a prefix of ``_recall`` / ``_recall_meta`` / ``_catalog``, or a line that starts
  with one (a complete line is judged by the grammar itself, ``core/commands.parse_line``);
  once a command line is complete, everything after it (the generation will be replaced by
  the one that follows the command's answer);
- a tool-call delta until its function name is known: an ARC tool's (``_recall``, ...) is
  dropped, a client tool's is released with the calls numbered as the client sees them;
  after an ARC call, everything.

``finish()`` ends the generation: if it turned out to hold no command, what was held back is
released (the caller asks ``serve_commands`` on the whole message, which decides). With
``commands=False`` (the step's last allowed generation, where a command is no longer
served) text passes at once and only ARC tool calls are dropped, as in the non-streamed
answer. Pure Python; ``tests/test_stream_filter.py`` checks that the released text always
equals what the non-streamed answer holds, whatever the split into deltas.
"""

from __future__ import annotations

import re

from arc_vllm.core.commands import COMMAND_WORDS, parse_line
from arc_vllm.serving.step.tools import ARC_TOOL_NAMES

_LEAD = re.compile(r"^[\s`]*")


def may_become_command(line: str) -> bool:
    """Could this incomplete line still turn into an ARC command line?"""
    start = _LEAD.sub("", line)
    return any(word.startswith(start) or start.startswith(word) for word in COMMAND_WORDS)


class HeldBack:
    def __init__(self, commands: bool = True, first_client_index: int = 0):
        self.commands = commands
        self.text = ""  # all content of this generation
        self.released = 0  # characters of it released
        self.stopped = False  # a command (line or ARC call) seen: release nothing more
        self.calls: dict[int, dict] = {}  # engine index -> {"arc": bool | None, "held": [...], "index": int}
        self.next_index = first_client_index
        self.held_logprobs: list = []

    def feed(self, delta: dict, logprobs: dict | None = None) -> tuple[dict, dict | None]:
        """One engine delta in; the delta (and logprobs) to send now (possibly empty)."""
        out = {key: value for key, value in delta.items() if key not in ("content", "tool_calls", "role")}
        if logprobs and logprobs.get("content"):
            self.held_logprobs.extend(logprobs["content"])
        if delta.get("content"):
            self.text += delta["content"]
        calls = [self._call(call) for call in delta.get("tool_calls") or []]
        released = [call for group in calls for call in group]
        content = self._releasable_text()
        if content:
            out["content"] = content
        if released:
            out["tool_calls"] = released
        sent_logprobs = None
        if content and self.held_logprobs:
            sent_logprobs, self.held_logprobs = {"content": self.held_logprobs}, []
        return out, sent_logprobs

    def finish(self) -> dict:
        """The generation ended without a command: everything still held, as one delta."""
        out = {}
        rest = self.text[self.released:]
        self.released = len(self.text)
        if rest:
            out["content"] = rest
        calls = []
        for call in self.calls.values():
            if call["arc"] is not True and call["held"]:
                if call["index"] is None:
                    call["index"], self.next_index = self.next_index, self.next_index + 1
                calls += [dict(piece, index=call["index"]) for piece in call["held"]]
                call["held"] = []
        if calls:
            out["tool_calls"] = calls
        return out

    @property
    def num_client_calls(self) -> int:
        return self.next_index

    def _releasable_text(self) -> str:
        if self.stopped and self.commands:
            return ""
        if not self.commands:
            end = len(self.text)
        else:
            end = self.released
            while True:  # whole lines first: each is judged by the grammar
                newline = self.text.find("\n", end)
                if newline < 0:
                    break
                if parse_line(self.text[end:newline]) is not None:
                    self.stopped = True  # a command: it and what follows are never shown
                    break
                end = newline + 1
            if not self.stopped and not may_become_command(self.text[end:]):
                end = len(self.text)
        content = self.text[self.released:end]
        self.released = max(self.released, end)
        return content

    def _call(self, piece: dict) -> list[dict]:
        """A tool-call delta: held until its name says whose it is."""
        index = piece.get("index", 0)
        call = self.calls.setdefault(index, {"arc": None, "held": [], "index": None})
        name = (piece.get("function") or {}).get("name")
        if call["arc"] is None and name:
            call["arc"] = name in ARC_TOOL_NAMES
            if call["arc"]:
                self.stopped = True
        if call["arc"] is True:
            return []
        call["held"].append(piece)
        if call["arc"] is None or (self.stopped and self.commands):
            return []
        if call["index"] is None:
            call["index"], self.next_index = self.next_index, self.next_index + 1
        released, call["held"] = [dict(held, index=call["index"]) for held in call["held"]], []
        return released
