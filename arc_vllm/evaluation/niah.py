"""Needle-in-a-Haystack as the paper defines it: a task environment with files and tools.

A 24-character needle from a 30-character alphabet sits in ``secrets.txt`` inside a banner
``THE NEEDLE FOR THIS TASK``, with ``noise_lines`` lines of noise on each side; distractor
files are labelled as noise. The agent reads files (``cat FILE``, ``ls``) and must finally
answer ``submit NEEDLE=<value>``; only that token is scored (exact match). Tasks are seeded:
task i of seed s is the same for every method (the same needle pool).

Run ``python -m arc_vllm.evaluation.niah`` to print one task's files.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field

ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ234567"  # 30 symbols: no I/O/0/1 look-alikes
NEEDLE_LENGTH = 24
WORDS = ("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike "
         "november oscar papa quebec romeo sierra tango uniform victor whiskey").split()
SUBMISSION = re.compile(r"submit\s+NEEDLE=(\S+)")


def noise(rng: random.Random, count: int, label: str) -> str:
    return "".join(f"{label} {n:04d}: {' '.join(rng.choices(WORDS, k=9))}\n" for n in range(count))


@dataclass
class NiahTask:
    seed: int
    index: int
    needle: str
    files: dict[str, str]
    order: list[str] = field(default_factory=list)

    @property
    def id(self) -> str:
        return f"niah-{self.seed}-{self.index}"

    @property
    def prompt(self) -> str:
        return ("Read these files in this order with `cat FILE`: " + ", ".join(self.order)
                + ". One of them holds THE NEEDLE FOR THIS TASK; the others are noise. After "
                "the last file, answer with exactly `submit NEEDLE=<value>`.")

    @property
    def action_regex(self) -> str:
        """This task's commands, for a model agent constrained to the protocol (the file names
        are the tool's valid arguments, as an enum in a tool schema would be)."""
        files = "|".join(re.escape(name) for name in self.order)
        return rf"ls|cat ({files})|submit NEEDLE=[{ALPHABET}]{{{NEEDLE_LENGTH}}}"

    def run(self, action: str) -> tuple[str, int]:
        """A tool call: (observation, return code)."""
        command = action.strip()
        if command == "ls":
            return "\n".join(sorted(self.files)) + "\n", 0
        if command.startswith("cat "):
            name = command[4:].strip()
            if name in self.files:
                return self.files[name], 0
            return f"cat: {name}: No such file or directory\n", 1
        return f"unknown command: {command.split()[0] if command else ''}\n", 127

    def score(self, action: str) -> bool | None:
        """True/False for a submission, None when the action is not one."""
        match = SUBMISSION.search(action)
        return None if match is None else match.group(1) == self.needle


def make_task(seed: int, index: int, noise_lines: int = 25, distractors: int = 8,
              distractor_lines: int = 60, needle_position: str = "first") -> NiahTask:
    """Task ``index`` of ``seed``. ``needle_position``: "first" (the paper: the needle comes
    early, so it must survive every compaction) or "random" (secrets.txt at a seeded place
    in the reading order, so methods that keep only recent text succeed sometimes)."""
    if needle_position not in ("first", "random"):
        raise ValueError(f"needle_position {needle_position!r}: choose first or random")
    rng = random.Random(seed * 1_000_003 + index)
    needle = "".join(rng.choices(ALPHABET, k=NEEDLE_LENGTH))
    secrets = (noise(rng, noise_lines, "noise") + "=== THE NEEDLE FOR THIS TASK ===\n"
               + f"NEEDLE={needle}\n=== END OF THE NEEDLE ===\n" + noise(rng, noise_lines, "noise"))
    files = {"secrets.txt": secrets}
    for number in range(distractors):
        files[f"noise_{number}.txt"] = ("# this file is noise: no needle here\n"
                                        + noise(rng, distractor_lines, f"n{number}"))
    order = [f"noise_{n}.txt" for n in range(distractors)]
    order.insert(rng.randrange(distractors + 1) if needle_position == "random" else 0, "secrets.txt")
    return NiahTask(seed, index, needle, files, order)


if __name__ == "__main__":
    task = make_task(42, 0, noise_lines=3, distractors=2, distractor_lines=3)
    print(task.prompt)
    for name in task.order:
        print(f"--- {name}\n{task.files[name]}")
