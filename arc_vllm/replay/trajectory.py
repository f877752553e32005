"""Recorded agent trajectories in the project's own JSONL, read with every malformed line
reported, not fatal. (Real agents' logs are read by ``replay/importers.py`` into the same
``Trajectory``.)

One trajectory per line:

    {"id": str, "task": str,
     "steps": [{"thought": str?, "action": str?, "observation": str?, "returncode": int?}, ...]}

A null or missing thought, action or observation is an empty string: real logs have them
(a finish step, an agent with no thought). Run ``python -m arc_vllm.replay.trajectory FILE``
to validate a file and print its counts.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from arc_vllm.core.transcript import Step, text_or_empty  # one step type for logs and requests


@dataclass
class Trajectory:
    id: str
    task: str
    steps: list[Step]
    line: int = 0
    system: str | None = None        # the agent's own system prompt, when the log has one


@dataclass
class TrajectoryFile:
    trajectories: list[Trajectory] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def parse_trajectory(record, line: int) -> Trajectory:
    if not isinstance(record, dict):
        raise ValueError("a trajectory must be a JSON object")
    missing = [key for key in ("id", "task", "steps") if key not in record]
    if missing:
        raise ValueError(f"missing field(s): {', '.join(missing)}")
    if not isinstance(record["steps"], list):
        raise ValueError("steps must be a list")
    steps = []
    for index, step in enumerate(record["steps"]):
        where = f"steps[{index}]"
        if not isinstance(step, dict):
            raise ValueError(f"{where} must be an object")
        returncode = step.get("returncode")
        if returncode is not None and (not isinstance(returncode, int) or isinstance(returncode, bool)):
            raise ValueError(f"{where}.returncode must be an integer or null")
        steps.append(Step(text_or_empty(step.get("action"), f"{where}.action"),
                          text_or_empty(step.get("observation"), f"{where}.observation"),
                          text_or_empty(step.get("thought", ""), f"{where}.thought"), returncode))
    if not isinstance(record["id"], (str, int)):
        raise ValueError("id must be a string")
    return Trajectory(str(record["id"]), text_or_empty(record["task"], "task"), steps, line,
                      record.get("system") if isinstance(record.get("system"), str) else None)


def load(path: str | Path) -> TrajectoryFile:
    """Every well-formed trajectory, and one error string per malformed line."""
    result = TrajectoryFile()
    seen = set()
    with open(path, "rb") as handle:
        for number, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            try:
                trajectory = parse_trajectory(json.loads(raw.decode("utf-8")), number)
            except (ValueError, UnicodeDecodeError) as error:
                result.errors.append(f"{path}:{number}: skipped: {error}")
                continue
            if trajectory.id in seen:
                result.errors.append(f"{path}:{number}: skipped: duplicate id {trajectory.id!r}")
                continue
            seen.add(trajectory.id)
            result.trajectories.append(trajectory)
    return result


if __name__ == "__main__":
    import sys

    loaded = load(sys.argv[1])
    for error in loaded.errors:
        print(error)
    print(f"{len(loaded.trajectories)} trajectories, "
          f"{sum(len(t.steps) for t in loaded.trajectories)} steps")
