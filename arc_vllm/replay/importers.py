"""Read the logs real agents write into ``Trajectory`` objects, detected by content.

    swe-agent       SWE-agent ``.traj``: {"trajectory": [{thought, action, observation}], "history": [...]}
                    (or only ``history``: chat messages, assistant ones with thought/action fields)
    mini-swe-agent  ``.traj.json``: a list of {role, content} messages, or {"messages": [...]};
                    the assistant's text holds a fenced ``mswea_bash_command`` (or ``bash``)
                    block, the next user message holds the output
    openhands       ``output.jsonl``: one {instance_id, instruction, history: [events]} per line;
                    action events {id, source, action, args{thought, command|path|...}},
                    observations {cause, observation, content}
    tau-bench       results JSON: a list of {task_id, traj: [chat messages with tool calls]}
    arc             the project's own JSONL (``replay/trajectory.py``)

Each keeps the agent's format: tool calls stay tool calls (style ``tool``), text agents'
turns stay their own text (``chat``), ARC's own format is ``react``. Null fields are empty
strings. A record that cannot be read is reported with its reason and skipped.

Run ``python -m arc_vllm.replay.importers FILE [--format NAME]`` to print what was read.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

from arc_vllm.replay.trajectory import Trajectory, TrajectoryFile, load
from arc_vllm.core.transcript import Step, take_in
from arc_vllm.core.turn import CHAT, REACT

FORMATS = ("arc", "swe-agent", "mini-swe-agent", "openhands", "tau-bench")
BASH_BLOCK = re.compile(r"```(?:mswea_bash_command|bash|sh)?\s*\n(.*?)\n?```", re.DOTALL)


def _str(value) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def from_messages(id: str, messages: list[dict]) -> Trajectory:
    """A chat transcript (system, task, then steps) as one trajectory."""
    items = take_in(messages, [], has_prefix=False)
    system = "\n\n".join(m["content"] for m in items.prefix if m["role"] == "system") or None
    task = "\n\n".join(m["content"] for m in items.prefix if m["role"] == "user")
    return Trajectory(id, task, items.steps, system=system)


def with_commands(trajectory: Trajectory) -> Trajectory:
    """Text agents write their command in a fenced block: it becomes the step's signature
    (what a stub names), the whole text stays the shown action."""
    steps = []
    for step in trajectory.steps:
        block = BASH_BLOCK.search(step.action) if step.style == CHAT else None
        steps.append(replace(step, signature=block.group(1).strip()) if block else step)
    trajectory.steps = steps
    return trajectory


def read_swe_agent(data: dict, name: str) -> list[Trajectory]:
    history = [m for m in data.get("history") or [] if isinstance(m, dict)]
    system = next((_str(m.get("content")) for m in history if m.get("role") == "system"), None)
    task = next((_str(m.get("content")) for m in history if m.get("role") == "user"), "")
    if data.get("trajectory"):
        steps = [Step(_str(item.get("action")), _str(item.get("observation")),
                      _str(item.get("thought")), style=REACT)
                 for item in data["trajectory"] if isinstance(item, dict)]
        return [Trajectory(name, task, steps, system=system)]
    # Only the chat history: assistant messages carry the action (and thought) as fields.
    messages = []
    for message in history:
        if message.get("role") == "assistant" and message.get("action") is not None:
            message = {"role": "assistant", "content": _str(message.get("action"))}
        messages.append({key: message.get(key) for key in ("role", "content", "tool_calls",
                                                            "tool_call_id", "name") if key in message})
    return [from_messages(name, messages)]


def read_mini_swe_agent(data, name: str) -> list[Trajectory]:
    messages = data["messages"] if isinstance(data, dict) else data
    return [with_commands(from_messages(name, [m for m in messages if isinstance(m, dict)]))]


def read_openhands(record: dict) -> Trajectory:
    events = [event for event in record.get("history") or [] if isinstance(event, dict)]
    results = {event.get("cause"): event for event in events if "observation" in event}
    steps = []
    for event in events:
        if "action" not in event or event.get("source") != "agent":
            continue
        args = event.get("args") or {}
        target = next((args[key] for key in ("command", "path", "code", "url", "content")
                       if args.get(key)), None)
        action = f"{event['action']} {_str(target)}".strip() if target is not None else _str(event["action"])
        result = results.get(event.get("id")) or {}
        extras = result.get("extras") or {}
        code = extras.get("exit_code", (extras.get("metadata") or {}).get("exit_code"))
        steps.append(Step(action, _str(result.get("content")), _str(args.get("thought")),
                          code if isinstance(code, int) and not isinstance(code, bool) else None))
    return Trajectory(str(record.get("instance_id", "openhands")), _str(record.get("instruction")),
                      steps)


def read_tau_bench(data: list, name: str) -> list[Trajectory]:
    out = []
    for index, result in enumerate(data):
        id = f"{name}:{result.get('task_id', index)}:{result.get('trial', 0)}"
        out.append(from_messages(id, [m for m in result.get("traj") or [] if isinstance(m, dict)]))
    return out


def detect(path: Path, text: str) -> str:
    """The format of a file, by its content."""
    stripped = text.lstrip()
    if stripped.startswith("["):
        data = json.loads(text)
        if data and isinstance(data[0], dict) and "traj" in data[0]:
            return "tau-bench"
        return "mini-swe-agent"
    if stripped.startswith("{"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            data = None  # one object per line
        if isinstance(data, dict):
            if "trajectory" in data or ("history" in data and "instruction" not in data):
                return "swe-agent"
            if "messages" in data:
                return "mini-swe-agent"
        first = json.loads(stripped.splitlines()[0])
        if "history" in first and ("instruction" in first or "instance_id" in first):
            return "openhands"
        if "steps" in first and "task" in first:
            return "arc"
    raise ValueError(f"{path}: not a known agent log format; use --format one of {', '.join(FORMATS)}")


def read(path: str | Path, format: str | None = None) -> TrajectoryFile:
    """Every trajectory in ``path``; unreadable records are reported in ``errors``."""
    path = Path(path)
    # Detection only needs the shape; the project's JSONL reports a bad line by number.
    text = path.read_bytes().decode("utf-8", errors="replace")
    format = format or detect(path, text)
    if format not in FORMATS:
        raise ValueError(f"--format: {format!r} is not one of {', '.join(FORMATS)}")
    if format == "arc":
        return load(path)
    text = path.read_text(encoding="utf-8")
    result = TrajectoryFile()
    name = path.name.split(".")[0]
    try:
        if format == "openhands":
            for number, line in enumerate(text.splitlines(), start=1):
                if line.strip():
                    try:
                        result.trajectories.append(read_openhands(json.loads(line)))
                    except (ValueError, TypeError, AttributeError) as error:
                        result.errors.append(f"{path}:{number}: skipped: {error}")
        elif format == "swe-agent":
            result.trajectories += read_swe_agent(json.loads(text), name)
        elif format == "mini-swe-agent":
            result.trajectories += read_mini_swe_agent(json.loads(text), name)
        else:
            result.trajectories += read_tau_bench(json.loads(text), name)
    except (ValueError, TypeError, AttributeError, KeyError) as error:
        result.errors.append(f"{path}: skipped: {error}")
    return result


def read_all(paths: list[str | Path], format: str | None = None) -> TrajectoryFile:
    """Files and folders (every file inside, sorted) into one list; unique ids."""
    result = TrajectoryFile()
    seen: set[str] = set()
    files = []
    for path in map(Path, paths):
        files += sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    for path in files:
        try:
            loaded = read(path, format)
        except (ValueError, OSError, UnicodeDecodeError) as error:
            result.errors.append(f"{path}: skipped: {error}")
            continue
        result.errors += loaded.errors
        for trajectory in loaded.trajectories:
            if trajectory.id in seen:
                trajectory.id = f"{path.name}:{trajectory.id}"
            seen.add(trajectory.id)
            result.trajectories.append(trajectory)
    return result


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("paths", nargs="+")
    parser.add_argument("--format", choices=FORMATS)
    args = parser.parse_args()
    loaded = read_all(args.paths, args.format)
    for error in loaded.errors:
        print(error)
    for trajectory in loaded.trajectories:
        styles = sorted({step.style for step in trajectory.steps})
        print(f"{trajectory.id}: {len(trajectory.steps)} steps ({', '.join(styles)}), task "
              f"{len(trajectory.task)} chars, system {len(trajectory.system or '')} chars")
