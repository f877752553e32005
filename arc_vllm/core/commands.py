"""The ARC command grammar, the one place that decides what is an ARC command.

Commands are read from the agent's *action* text only, one per line:

    _recall §<id>            the stored observation (whole, if it fits the recall limits)
    _recall §<id> <n>        chunk n (1-based) of at most q tokens
    _recall_meta §<id>       only the citation metadata
    _catalog next            the next page of the citation catalog
    _catalog page <n>        page n (1-based)

The § sign is optional; surrounding backticks and trailing punctuation are ignored. A line
that starts with ``_recall`` or ``_catalog`` but does not match is an ``InvalidCommand`` with
a usage hint, never passed on to the environment. Tool observations are never parsed: a
``_recall §...`` inside an observation is data. Run ``python -m arc_vllm.core.commands TEXT``.

The command set is written here once (``COMMANDS``); everything else derives from it: the usage
hint, the constrained-decoding pattern of a model agent (``ACTION_REGEX``), ARC's tools on the
server (``serving/step/tools.py``), the streaming filter's command words and the texts ARC shows
(``core/formats.py``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Recall:
    id: str
    chunk: int | None = None


@dataclass(frozen=True)
class RecallMeta:
    id: str


@dataclass(frozen=True)
class CatalogNext:
    pass


@dataclass(frozen=True)
class CatalogPage:
    page: int


@dataclass(frozen=True)
class InvalidCommand:
    text: str
    error: str


Command = Recall | RecallMeta | CatalogNext | CatalogPage | InvalidCommand


@dataclass(frozen=True)
class CommandResult:
    """What serving one command did: ``text`` is the framework's answer to the agent."""

    ok: bool
    text: str
    key: tuple | None = None   # the (id, chunk) a successful recall materialised in U


RECALL, RECALL_META, CATALOG = "_recall", "_recall_meta", "_catalog"


@dataclass(frozen=True)
class CommandSpec:
    """One ARC command: its word (also its tool's name), its text forms, the pattern a model
    agent constrained to the protocol may emit, and its tool's description and parameters."""

    word: str
    forms: tuple[str, ...]
    action_regex: str
    description: str
    parameters: dict


_HEX_ID = "§[0-9a-f]{8,40}"
COMMANDS = (
    CommandSpec(RECALL, (f"{RECALL} §id", f"{RECALL} §id <chunk>"), rf"{RECALL} {_HEX_ID}( [0-9]{{1,4}})?",
                "Return a stored observation exactly by its §id (optionally one chunk of a long one).",
                {"type": "object", "properties": {"id": {"type": "string"},
                                                  "chunk": {"type": "integer", "minimum": 1}},
                 "required": ["id"]}),
    CommandSpec(RECALL_META, (f"{RECALL_META} §id",), f"{RECALL_META} {_HEX_ID}",
                "Return only the citation metadata of a §id.",
                {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}),
    CommandSpec(CATALOG, (f"{CATALOG} next", f"{CATALOG} page <n>"), rf"{CATALOG} next|{CATALOG} page [0-9]{{1,4}}",
                "Show the next page, or page N, of the citation catalog.",
                {"type": "object", "properties": {"page": {"type": "integer", "minimum": 1}}}),
)
# Longest first, so that a prefix match never takes _recall for _recall_meta.
COMMAND_WORDS = tuple(sorted((spec.word for spec in COMMANDS), key=len, reverse=True))
USAGE = "ARC commands: " + ", ".join(f"`{form}`" for spec in COMMANDS for form in spec.forms)
ACTION_REGEX = "|".join(spec.action_regex for spec in COMMANDS)

def command_of(word: str, arguments: dict, text: str) -> Command:
    """The command ``word`` names with ``arguments`` (``id``, ``chunk``, ``page``): the one check
    of a command's values, for a line of text (``parse_line``) and a tool call
    (``serving/step/tools.py``) alike; an ``InvalidCommand`` of ``text`` that says what is wrong."""
    def count(value) -> bool:  # a chunk or page number: 1, 2, ...
        return isinstance(value, int) and not isinstance(value, bool) and value >= 1

    if word == CATALOG:
        page = arguments.get("page")
        if page is None:
            return CatalogNext()
        return CatalogPage(page) if count(page) else InvalidCommand(
            text, "page must be an integer >= 1 (catalog pages are numbered from 1)")
    id = arguments.get("id")
    id = id.strip().lstrip("§") if isinstance(id, str) else ""
    if word not in (RECALL, RECALL_META):
        return InvalidCommand(text, f"not a valid ARC command. {USAGE}")
    if not id:
        return InvalidCommand(text, "id must be a §id string")
    if word == RECALL_META:
        return RecallMeta(id)
    chunk = arguments.get("chunk")
    if chunk is not None and not count(chunk):
        return InvalidCommand(text, "chunk must be an integer >= 1 (chunks are numbered from 1)")
    return Recall(id, chunk)


_ID = r"§?(?P<id>[^\s`]+?)[.,;:!?)\]]*"
_PATTERNS = [  # a line's form -> the command's word and arguments
    (re.compile(rf"{RECALL_META}\s+{_ID}"), lambda m: (RECALL_META, {"id": m["id"]})),
    (re.compile(rf"{RECALL}\s+{_ID}(?:\s+(?:chunk\s+)?(?P<chunk>\d+))?"),
     lambda m: (RECALL, {"id": m["id"], "chunk": int(m["chunk"]) if m["chunk"] else None})),
    (re.compile(rf"{CATALOG}\s+next"), lambda m: (CATALOG, {})),
    (re.compile(rf"{CATALOG}\s+page\s+(?P<page>\d+)"), lambda m: (CATALOG, {"page": int(m["page"])})),
]
_PREFIX = re.compile("(" + "|".join(COMMAND_WORDS) + r")\b")


def parse_line(line: str) -> Command | None:
    """The command on one line of action text, or None when the line is not a command."""
    text = line.strip().lstrip("`").rstrip("`.,;:!?)] \t").strip()
    if not _PREFIX.match(text):
        return None
    for pattern, build in _PATTERNS:
        match = pattern.fullmatch(text)
        if match:
            return command_of(*build(match), text)
    return InvalidCommand(text, f"not a valid ARC command. {USAGE}")


def parse_commands(action: str) -> list[Command]:
    """Every ARC command in an action, in order (empty when the action is a normal one)."""
    if not isinstance(action, str):
        raise TypeError(f"action must be str, not {type(action).__name__}")
    return [command for line in action.splitlines()
            if (command := parse_line(line)) is not None]


if __name__ == "__main__":
    import sys

    for command in parse_commands(" ".join(sys.argv[1:]) or "_recall §1f3a9c0d 2"):
        print(command)
