"""Clients' own compaction turns, recognised: one table of what each client sends when it asks
its model for a summary of the conversation, and the form of answer it expects.

Agents compact on their own when they believe the window is near: an ordinary request whose
last user message asks the model to summarise everything so far. ARC answers such a turn from
its store instead (``serving/compaction/ask.py``: no model call, nothing lost), so it must know
one when it sees it:

    client       recognised by                                            answer's form
    codex        x-codex-turn-metadata  "request_kind": "compaction",     plain text
                 or a user message holding "You are performing a
                 CONTEXT CHECKPOINT COMPACTION"
    claude-code  a user message holding "CRITICAL: Respond with TEXT      <analysis>…</analysis>
                 ONLY" and "<summary>"                                    <summary>…</summary>
                 (its retry adds a paragraph: the same turn)
    any client   header X-ARC-Compaction, or vllm_xargs.arc_compaction:   as named
                 "plain" or "summary-tags"

Only the newest user message is looked at: that is where every client puts the request, and a
conversation that merely quotes such a prompt earlier is not a compaction turn. The prompt is
the client's instruction to its model, not an observation: it is taken out before the
request's messages are archived (``without_prompt``). To add a client, add a row to
``KNOWN_PROMPTS`` (and a test with its recorded prompt).

Run ``python -m arc_vllm.serving.compaction.turns`` for an example.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from arc_vllm.core.transcript import TEXT_PART_TYPES
from arc_vllm.kv.extra_args import compaction_of_body
from arc_vllm.serving.errors import SessionError

PLAIN, SUMMARY_TAGS = "plain", "summary-tags"
FORMS = (PLAIN, SUMMARY_TAGS)
MARKER_HEADER = "x-arc-compaction"
CODEX_METADATA = "x-codex-turn-metadata"


@dataclass(frozen=True)
class KnownPrompt:
    client: str
    marker: str                   # text the client's compaction prompt always holds
    form: str
    also: str = ""                # and this, where the marker alone could be a user's words


KNOWN_PROMPTS = (
    KnownPrompt("codex", "You are performing a CONTEXT CHECKPOINT COMPACTION", PLAIN),
    KnownPrompt("claude-code", "CRITICAL: Respond with TEXT ONLY", SUMMARY_TAGS, also="<summary>"),
)


@dataclass(frozen=True)
class CompactionTurn:
    client: str                   # a KNOWN_PROMPTS client, or "marked" (header / vllm_xargs)
    form: str                     # PLAIN or SUMMARY_TAGS
    prompt_index: int | None      # the message holding the prompt (None: it holds none)


def _texts(message: dict) -> list[str]:
    content = message.get("content")
    if isinstance(content, str):
        return [content]
    if isinstance(content, list):
        return [part.get("text") for part in content if isinstance(part, dict)
                and part.get("type", "text") in TEXT_PART_TYPES and isinstance(part.get("text"), str)]
    return []


def _known(text: str) -> KnownPrompt | None:
    for prompt in KNOWN_PROMPTS:
        if prompt.marker in text and prompt.also in text:
            return prompt
    return None


def _codex_says_compaction(headers: dict[str, str]) -> bool:
    try:
        metadata = json.loads(headers.get(CODEX_METADATA) or "null")
    except ValueError:
        return False
    return isinstance(metadata, dict) and metadata.get("request_kind") == "compaction"


def recognise(headers: dict[str, str], body: dict, messages: list[dict]) -> CompactionTurn | None:
    """The compaction turn a request is, or None. ``messages``: its chat messages (every API's
    request as the ARC path runs it). Raises ``SessionError`` (400) for an explicit marker naming no
    form."""
    last = next((index for index in range(len(messages) - 1, -1, -1)
                 if isinstance(messages[index], dict) and messages[index].get("role") == "user"), None)
    known = None
    if last is not None and last == len(messages) - 1:
        texts = _texts(messages[last])
        known = next(filter(None, map(_known, texts)), None) or _known("\n".join(texts))
    marked = compaction_of_body(body)
    marked = headers.get(MARKER_HEADER) if marked is None else marked
    if marked is not None:
        if marked not in FORMS:
            raise SessionError(f"{MARKER_HEADER} / vllm_xargs.arc_compaction: {str(marked)[:40]!r} is not one of "
                            f"{', '.join(FORMS)}")
        return CompactionTurn("marked", marked, last if last == len(messages) - 1 else None)
    if known is not None:
        return CompactionTurn(known.client, known.form, last)
    if _codex_says_compaction(headers) and last == len(messages) - 1:
        return CompactionTurn("codex", PLAIN, last)
    return None


def without_prompt(messages: list[dict], turn: CompactionTurn) -> list[dict]:
    """The request's messages without its compaction prompt: the message holding it, or only
    its parts that hold it where the client put other parts beside it (a tool result)."""
    if turn.prompt_index is None:
        return messages
    message = messages[turn.prompt_index]
    content = message.get("content")
    kept = []
    if isinstance(content, list) and turn.client != "marked":
        kept = [part for part in content if not (isinstance(part, dict) and isinstance(part.get("text"), str)
                                                 and _known(part["text"]) is not None)]
        if len(kept) == len(content):  # recognised by a header: the whole message is the prompt
            kept = []
    rest = messages[:turn.prompt_index] + messages[turn.prompt_index + 1:]
    if kept:
        rest.insert(turn.prompt_index, dict(message, content=kept))
    return rest


# The prompt ``--arc-client-compaction model`` asks the model with where a marked request
# carried none of its own.
DEFAULT_PROMPT = ("Summarise the conversation so far for another model that will continue the task: the goal, "
                  "what was done and found, what remains. Refer to stored observations by their §id.")


def prompt_of(messages: list[dict], turn: CompactionTurn) -> dict:
    """The client's compaction prompt as a message (the model answers it in ``model`` mode)."""
    if turn.prompt_index is None:
        return {"role": "user", "content": DEFAULT_PROMPT}
    return dict(messages[turn.prompt_index])


def answer_text(turn: CompactionTurn, handoff: str) -> str:
    """ARC's handoff in the form the client expects, so it takes it at once (Claude Code
    asks again when an answer has no ``<summary>``)."""
    if turn.form == SUMMARY_TAGS:
        return ("<analysis>\nWritten by ARC from its store of this session, with no model call: every tool "
                "observation is kept verbatim and can be recalled by its §id.\n</analysis>\n\n"
                f"<summary>\n{handoff}\n</summary>")
    return handoff


if __name__ == "__main__":
    messages = [{"role": "user", "content": "Fix the tests."}, {"role": "assistant", "content": "Done."},
                {"role": "user", "content": "You are performing a CONTEXT CHECKPOINT COMPACTION. Create a "
                                            "handoff summary for another LLM that will resume the task."}]
    turn = recognise({}, {}, messages)
    print(turn, without_prompt(messages, turn))
