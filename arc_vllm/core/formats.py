"""Every string ARC writes into a prompt, and the patterns that read them back.

One owner for the text contract between ARC, the agents and the tests: the ReAct turn
format ("Action:" / "Observation:") of ARC's own harness, how a cited or minimal
observation and a command's response are shown, the recalled-content markers, and the
patterns the scripted agent uses to read prompts. Change a format here and its pattern
beside it.

Run ``python -m arc_vllm.core.formats`` to print each format once.
"""

from __future__ import annotations

import re

from arc_vllm.core.commands import CATALOG, RECALL, RECALL_META

ACTION_PREFIX = "Action: "
OBSERVATION_PREFIX = "Observation:\n"
CITED_PREFIX = "Observation (cited, not shown in full):\n"
COMMAND_PREFIX = "[ARC] "
# ARC's note: a statement about the context only (what stubs are, how to take text back), so
# it reads right beside any agent's own identity and rules (Claude Code's, Codex's, a
# benchmark's). The agent's prompt says who it is; ARC only says what it did to the context.
ARC_NOTE = (
    "ARC manages this context: older tool observations may be replaced by citation stubs "
    "like §1f3a9c0d, and nothing is ever lost. To read a stored observation exactly, use "
    f"`{RECALL} §id` (long ones come in chunks: `{RECALL} §id 2`); `{RECALL_META} §id` shows "
    f"its metadata; `{CATALOG} next` and `{CATALOG} page <n>` page through every stored "
    "observation. Use them as tool calls where those tools are offered, else as an action line.")
CLIPPED_ARGUMENTS_KEY = "_arc_clipped"
CATALOG_PAGE_MARK = "[ARC catalog page"
CATALOG_WRAPPED = "wrapped around"


def react_action(thought: str, action: str) -> str:
    """An assistant step in ARC's own protocol: an optional thought line, then the action."""
    return f"{thought}\n{ACTION_PREFIX}{action}" if thought else f"{ACTION_PREFIX}{action}"


def observation_block(text: str, verbatim: bool) -> str:
    """A tool observation in ARC's own protocol (``text`` is the body, or a cited form)."""
    return OBSERVATION_PREFIX + text if verbatim else text


def cited_observation(stub: str) -> str:
    return CITED_PREFIX + stub


def minimal_observation(step: int, id: str) -> str:
    return f"[step {step}] §{id} ({RECALL} §{id})"


def command_response(note: str) -> str:
    """The framework's answer to an ARC command, shown where the observation would be."""
    return COMMAND_PREFIX + note


RECALLED_HEADER = ("[ARC RECALLED · exact stored text; least recently used recalls fall back to "
                   "stubs when space runs out]")


def recalled_block(items: list[tuple[str, str]]) -> str:
    """U: the materialised bodies, exactly, each between labelled markers."""
    if not items:
        return ""
    parts = [RECALLED_HEADER]
    for label, body in items:
        parts.append(f"<<< {label} >>>\n{body}\n<<< end {label.split()[0]} >>>")
    return "\n".join(parts)


# --- citation stubs (core/citation.py decides their size) ---------------------------------
NEWLINE_MARK = "⏎"


def preview(text: str) -> str:
    return text.replace("\r\n", NEWLINE_MARK).replace("\n", NEWLINE_MARK).replace("\r", NEWLINE_MARK)


def short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


def bare(id: str) -> str:
    return f"§{id}"


def stub(record, head: str, tail: str, signature_chars: int) -> str:
    """A citation stub: §id, signature and metadata, head and tail previews, the recall hint."""
    rc = "rc -" if record.returncode is None else f"rc {record.returncode}"
    lines = [f"§{record.id} · {short(preview(record.signature), signature_chars) or '(no action)'}"
             f" · {record.chars:,} chars · {record.lines:,} lines · {rc} · step {record.step}"]
    if head:
        more = "…" if len(head) < record.chars else ""
        lines.append(f"  head: {preview(head)}{more}")
    if tail:
        lines.append(f"  tail: …{preview(tail)}")
    lines.append(f"  ({RECALL} §{record.id} for the full text)")
    return "\n".join(lines)


def smallest_stub(record) -> str:
    return f"§{record.id} · {record.chars:,} chars ({RECALL} §{record.id})"


# --- the catalog (core/catalog.py) -----------------------------------------------------------
def catalog_footer(page: int, pages: int, first: int, last: int, total: int) -> str:
    """The line that ends a catalog page (after its stubs, so that a page that gains a stub
    keeps its text up to the new one: the engine's prefix cache)."""
    return (f"{CATALOG_PAGE_MARK} {page}/{pages} · stubs {first}-{last} of {total} · "
            f"`{CATALOG} next` · `{CATALOG} page <n>` · `{RECALL} §id`]")


def catalog_shown(page: int, pages: int) -> str:
    return f"catalog: page {page} of {pages} shown"


def catalog_wrapped(pages: int) -> str:
    return f"catalog: {CATALOG_WRAPPED} to page 1 of {pages}"


def catalog_no_page(page: int, pages: int) -> str:
    return f"catalog: no page {page}; pages are 1..{pages}"


# --- the summary S (core/compaction.py) ------------------------------------------------------
SUMMARY_HEADER = f"[ARC summary of earlier steps; §ids are exact stored observations: `{RECALL} §id`]"


def summary_entry(step: int, thought: str, action: str, result: str, indent: bool = False,
                  thinking: str | None = None) -> str:
    """One summarised step: its (clipped) thought and action, then its result: a stub
    (``indent``: its lines under the arrow), an inline short observation, or an ARC
    command's reply. ``thinking``: the id of the step's stored thinking (``core/thinking.py``)."""
    head = (f"step {step}" + (f" · thought: {thought}" if thought else "") + f" · action: {action}"
            + thinking_reference(thinking))
    return f"{head}\n  → " + (result.replace("\n", "\n    ") if indent else result)


def summary_bare(step: int, reference: str, thinking: str | None = None) -> str:
    return f"step {step} · {reference}" + thinking_reference(thinking)


def thinking_reference(id: str | None) -> str:
    """Where a summarised step's thinking is: its id ('' for a step without)."""
    return f" · thinking §{id}" if id else ""


def inline_observation(id: str, returncode, content: str) -> str:
    return f"{bare(id)} (rc {returncode}): {content}"


# One text whatever S leaves out, so that S's start stays as it was when it leaves out more (the
# steps S still lists carry their numbers; the catalog lists the rest).
SUMMARY_ELIDED = "(earlier steps are not listed here; their stubs are in the catalog)"


def summary_human(step: int, action: str, thinking: str | None = None) -> str:
    """A human turn in S: the assistant's text before it (and where its thinking is), and where
    the user's words are (W, never an id: ``core/human_turns.py``)."""
    head = (f"step {step} · action: {action}{thinking_reference(thinking)}\n  → " if action or thinking
            else f"step {step} · ")
    return head + "the user's message (with the user's messages above, in their words)"


# --- thinking (core/thinking.py) ---------------------------------------------------------------
THINKING_SIGNATURE = "thinking"  # the store's signature of a stored thought (what its stub names)


def thinking_stub(head: str, id: str, chars: int) -> str:
    """A thought shown by its head: the id that returns it whole first, so it is never lost
    to a reader who stops early."""
    return f"[ARC · thought §{id}, {chars:,} chars, its head shown; `{RECALL} §{id}` returns it whole] {head}…"


# --- the user's own messages (core/human_turns.py) -------------------------------------------
HUMAN_TURNS_HEADER = ("[ARC · the user's own messages since the task, in order, verbatim; a long one may show "
                      f"only its head, and `{RECALL} §id` returns it whole]")


def human_entry(step: int, body: str) -> str:
    """One of the user's messages in W: its step (as S numbers them) and its body as shown."""
    return f"step {step} · the user wrote:\n{body}"


def human_head(head: str, id: str, chars: int) -> str:
    """A user's message shortened to its head, and the stub line that names its whole text."""
    return f"{head}… [ARC: its first {len(head):,} of {chars:,} characters; `{RECALL} §{id}` returns it whole]"


def humans_elided(first_step: int, last_step: int) -> str:
    return (f"(the user's messages of steps {first_step}-{last_step} are left out here for room; each is "
            f"stored whole and listed in the catalog: `{CATALOG} next`)")


# --- the handoff (core/handoff.py): ARC's answer to a client's compaction --------------------
HANDOFF_MARK = "[ARC handoff"
HANDOFF_HANDLE_MARK = "[ARC handle "
# An earlier handoff inside a message of the conversation (a client keeps the last one in its
# history): from its header to its handle line.
HANDOFF_BLOCK = re.compile(re.escape(HANDOFF_MARK) + r" ·.*?" + re.escape(HANDOFF_HANDLE_MARK) + r"[^\]\s]*\]",
                           re.DOTALL)
EARLIER_HANDOFF = "[an earlier ARC handoff stood here; everything it listed is in this one or in the catalog]"


def handoff_header(observations: int) -> str:
    return (f"{HANDOFF_MARK} · written by ARC from its store, no model call · {observations:,} tool "
            f"observation(s) stored verbatim, none lost · `{RECALL} §id` returns any of them exactly]")


HANDOFF_SECTIONS = {"task": "## Task (the user's own words)",
                    "humans": "## The user's messages since the task (verbatim, in order)",
                    "users": "## The newest user-side messages",
                    "done": "## What was done",
                    "newest": "## The newest turns, verbatim",
                    "catalog": "## Stored observations not listed above"}


HANDOFF_HUMAN_ABOVE = "(the user's message: with the user's messages above)"


def handoff_turn(step: int, action: str, result: str) -> str:
    return f"step {step} · action: {action}\n{result}"


def handoff_user_message(step: int, text: str) -> str:
    return f"step {step}: {text}"


def handoff_more(shown: int, total: int) -> str:
    return (f"({total - shown:,} more: `{CATALOG} next` and `{CATALOG} page <n>` page through "
            f"every stored observation)")


def clipped_middle(text: str, head: int, tail: int) -> str:
    """``text`` with its middle left out, saying how much."""
    hidden = len(text) - head - tail
    return f"{text[:head]}\n[… {hidden:,} characters not shown …]\n{text[len(text) - tail:]}"


def handoff_recall(observations: int) -> str:
    return (f"## How to recall\nEvery observation above is stored exactly ({observations:,} in all). "
            f"`{RECALL} §id` returns one (long ones in chunks: `{RECALL} §id 2`); `{RECALL_META} §id` "
            f"its metadata; `{CATALOG} next` / `{CATALOG} page <n>` list them all. Use them as tool "
            "calls where those tools are offered, else as an action line.")


def handoff_handle(handle: str) -> str:
    return f"{HANDOFF_HANDLE_MARK}{handle}]"


# --- recall replies (core/recall.py) ---------------------------------------------------------
def recall_limit(r: int) -> str:
    return f"refused: the per-step recall limit r={r} is reached; issue further recalls in the next step"


def recall_unknown(id: str, near: list[str]) -> str:
    hint = (f" Did you mean {', '.join('§' + id for id in near)}?" if near
            else f" `{CATALOG} next` lists the stored observations.")
    return f"no observation §{id} in this session.{hint}"


def recall_no_chunk(id: str, total: int) -> str:
    return f"§{id} has {total} chunk(s); ask for 1..{total}"


def recalled_whole(id: str, chars: int) -> str:
    return f"§{id} recalled in full ({chars:,} chars); it is shown under RECALLED"


def recalled_chunk(id: str, chunk: int, total: int, chars: int) -> str:
    follow = f"; next: `{RECALL} §{id} {chunk + 1}`" if chunk < total else "; last chunk"
    return f"§{id} chunk {chunk}/{total} recalled ({chars:,} chars), shown under RECALLED{follow}"


def recalled_inline(id: str, chunk: int | None, total: int) -> str:
    """The head of a recall answered in place (a tool message holding the text)."""
    if chunk is None:
        return f"§{id}, exact stored text:"
    follow = f"next: `{RECALL} §{id} {chunk + 1}`" if chunk < total else "last chunk"
    return f"§{id} chunk {chunk}/{total} ({follow}), exact stored text:"


def recalled_label(id: str, chunk: int | None, total: int) -> str:
    return f"§{id}" if chunk is None else f"§{id} chunk {chunk}/{total}"


# --- patterns that read the formats back (the scripted agent, tests) -----------------------
READ_ACTION = re.compile(r"Action: cat (\S+)")
STUB_OF = "§([0-9a-f]{{8,40}}) · {signature}"          # .format(signature=re.escape(...))
NEXT_CHUNK = re.compile(rf"next: `({RECALL} §[0-9a-f]+ \d+)`")
RECALLED_CHUNK = re.compile(r"<<< §([0-9a-f]+) chunk (\d+)/(\d+) >>>\n(.*?)\n<<< end §", re.DOTALL)


def tried(action: str, text: str) -> bool:
    """Whether ``action`` was already taken in a prompt written in ARC's own protocol."""
    return f"{ACTION_PREFIX}{action}" in text


if __name__ == "__main__":
    print(react_action("I will look.", "cat a.txt"))
    print(observation_block("alpha", True))
    print(cited_observation("§1f3a9c0d · cat a.txt · 5 chars"))
    print(minimal_observation(3, "1f3a9c0d"))
    print(command_response("§1f3a9c0d recalled in full"))
    print(recalled_block([("§1f3a9c0d", "alpha")]))
