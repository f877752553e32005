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

ACTION_PREFIX = "Action: "
OBSERVATION_PREFIX = "Observation:\n"
CITED_PREFIX = "Observation (cited, not shown in full):\n"
COMMAND_PREFIX = "[ARC] "
CLIPPED_ARGUMENTS_KEY = "_arc_clipped"


def react_action(thought: str, action: str) -> str:
    """An assistant step in ARC's own protocol: an optional thought line, then the action."""
    return f"{thought}\n{ACTION_PREFIX}{action}" if thought else f"{ACTION_PREFIX}{action}"


def observation_block(text: str, verbatim: bool) -> str:
    """A tool observation in ARC's own protocol (``text`` is the body, or a cited form)."""
    return OBSERVATION_PREFIX + text if verbatim else text


def cited_observation(stub: str) -> str:
    return CITED_PREFIX + stub


def minimal_observation(step: int, id: str) -> str:
    return f"[step {step}] §{id} (_recall §{id})"


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


# --- patterns that read the formats back (the scripted agent, tests) -----------------------
READ_ACTION = re.compile(r"Action: cat (\S+)")
STUB_OF = "§([0-9a-f]{{8,40}}) · {signature}"          # .format(signature=re.escape(...))
NEXT_CHUNK = re.compile(r"next: `(_recall §[0-9a-f]+ \d+)`")
RECALLED_CHUNK = re.compile(r"<<< §([0-9a-f]+) chunk (\d+)/(\d+) >>>\n(.*?)\n<<< end §", re.DOTALL)
CATALOG_PAGE_MARK = "[ARC catalog page"
CATALOG_WRAPPED = "wrapped around"


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
