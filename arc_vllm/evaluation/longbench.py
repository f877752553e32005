"""LongBench-v2 (hard subset) as an agent task: the document is read page by page through a tool.

The official data is one JSON array (``data.json``; JSON Lines also read) of items with
``_id, domain, sub_domain, difficulty, length, question, choice_A..choice_D, answer,
context``; the hard subset is every item whose difficulty is not "easy". The context is cut
into pages of ``page_chars`` characters (at line ends where possible) that the agent reads
with ``read_page N``; at a few thousand characters a page, a long document cannot all fit
in the window, so full context fails as in the paper. The answer is extracted with the
official patterns (``The correct answer is (X)``, then ``The correct answer is X``, after
removing ``*``) and scored by exact letter.

The data set is not shipped: ``arc-vllm bench longbench --data PATH``. A small fixture in
the same schema (written for this project) is ``tests/fixtures/longbench_v2_sample.json``.
Run ``python -m arc_vllm.evaluation.longbench PATH`` to print the hard subset's sizes.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

FIELDS = ("_id", "domain", "sub_domain", "difficulty", "length", "question",
          "choice_A", "choice_B", "choice_C", "choice_D", "answer", "context")
ANSWER_PATTERNS = (re.compile(r"The correct answer is \(([A-D])\)"), re.compile(r"The correct answer is ([A-D])"))
READ = re.compile(r"^read_page\s+(\d+)$")


def extract_answer(response: str) -> str | None:
    """The official LongBench-v2 extraction: a letter A-D, or None."""
    response = response.replace("*", "")
    for pattern in ANSWER_PATTERNS:
        match = pattern.search(response)
        if match:
            return match.group(1)
    return None


def load(path: str | Path, subset: str = "hard") -> list[dict]:
    """Items of the official file; ``subset`` is "hard" (difficulty != easy) or "all"."""
    path = Path(path)
    if not path.exists():
        raise ValueError(f"no LongBench-v2 file at {path} (give the official data.json with --data)")
    text = path.read_text(encoding="utf-8")
    try:
        items = json.loads(text) if text.lstrip().startswith("[") else \
            [json.loads(line) for line in text.splitlines() if line.strip()]
    except json.JSONDecodeError as error:
        raise ValueError(f"{path}: not JSON or JSON Lines ({error})") from None
    for number, item in enumerate(items):
        missing = [field for field in FIELDS if field not in item]
        if missing:
            raise ValueError(f"{path}: item {number} lacks {', '.join(missing)} (LongBench-v2 schema)")
        if item["answer"] not in ("A", "B", "C", "D"):
            raise ValueError(f"{path}: item {number} ({item['_id']}) has answer {item['answer']!r}, not A-D")
    if subset == "hard":
        return [item for item in items if item["difficulty"] != "easy"]
    if subset == "all":
        return items
    raise ValueError(f"unknown subset {subset!r}; choose hard or all")


def pages(text: str, page_chars: int) -> list[str]:
    """Consecutive pages of at most ``page_chars`` characters that join to ``text``."""
    out, start = [], 0
    while start < len(text):
        end = min(start + page_chars, len(text))
        if end < len(text):
            cut = text.rfind("\n", start + page_chars // 2, end)
            end = cut + 1 if cut >= 0 else end
        out.append(text[start:end])
        start = end
    return out or [""]


@dataclass
class LongBenchTask:
    item: dict
    seed: int
    index: int
    page_chars: int = 3000
    max_calls: int | None = None   # agent calls before no answer; default: every page + 20

    def __post_init__(self):
        self.pages = pages(self.item["context"], self.page_chars)
        if self.max_calls is None:  # every page, plus room to recall and answer
            self.max_calls = len(self.pages) + 20

    @property
    def id(self) -> str:
        return f"longbench-{self.item['_id']}-{self.seed}"

    @property
    def prompt(self) -> str:
        choices = "\n".join(f"({letter}) {self.item['choice_' + letter]}" for letter in "ABCD")
        return (f"Read the document with `read_page N` (pages 1 to {len(self.pages)}), then answer "
                f"the question.\n\nQuestion: {self.item['question']}\n{choices}\n\nWhen you know the "
                "answer, the action is exactly `The correct answer is (X)` with X one of A, B, C, D.")

    @property
    def action_regex(self) -> str:
        return r"read_page [0-9]{1,4}|The correct answer is \([ABCD]\)"

    def run(self, action: str) -> tuple[str, int]:
        match = READ.match(action.strip())
        if not match:
            return (f"unknown command: {action.strip()[:80]!r}; use `read_page N` or answer with "
                    "`The correct answer is (X)`\n"), 127
        number = int(match.group(1))
        if not 1 <= number <= len(self.pages):
            return f"no page {number}: pages are 1 to {len(self.pages)}\n", 1
        end = "\n[END OF DOCUMENT]" if number == len(self.pages) else ""
        return f"[page {number}/{len(self.pages)}]\n{self.pages[number - 1]}{end}\n", 0

    def score(self, action: str) -> bool | None:
        answer = extract_answer(action)
        return None if answer is None else answer == self.item["answer"]


if __name__ == "__main__":
    import sys

    hard = load(sys.argv[1])
    print(f"{len(hard)} hard items; context chars: min {min(len(i['context']) for i in hard)}, "
          f"max {max(len(i['context']) for i in hard)}")
