"""The model as the agent: the rendered prompt goes to a backend, the reply is parsed.

The reply's last line ``Action: <command>`` is the action (backticks stripped); the text
before it is the thought. A reply without that line is taken whole as the action (its first
line), so a model that ignores the format still acts, and the environment says what it did
not understand. With ``action_regex`` (the task's commands, plus ARC's where the policy
offers them) the reply is constrained to ``Action: <one of them>`` by structured outputs,
as tool calling constrains a call to its schema: the model still chooses every action, but
cannot answer outside the protocol. ``usage`` holds the last call's figures for the loop's records; the
backend's ``ContextLengthError`` passes through to the loop's reactive path.

Run ``python -m arc_vllm.agent.model_agent`` for one decision of the embedded model.
"""

from __future__ import annotations

import re
import uuid

ACTION = re.compile(r"^\s*\**Action\**\s*:\s*(.+?)\s*$", re.MULTILINE | re.IGNORECASE)


def parse_reply(text: str) -> tuple[str, str]:
    """(thought, action) from a ReAct-style reply."""
    matches = list(ACTION.finditer(text))
    if matches:
        last = matches[-1]
        thought = text[: last.start()].strip()
        thought = thought[len("Thought:"):].strip() if thought.startswith("Thought:") else thought
        return thought, last.group(1).strip().strip("`").strip()
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return "", (lines[0].strip("`").strip() if lines else "")


def action_grammar(*alternatives: str | None) -> str:
    """The reply grammar: an optional short thought line, then ``Action: <alternative>``."""
    choices = "|".join(f"(?:{a})" for a in alternatives if a)
    return rf"(Thought: [^\n]{{0,160}}\n)?Action: ({choices})"


class ModelAgent:
    def __init__(self, backend, max_tokens: int = 128, action_regex: str | None = None):
        self.backend = backend
        self.max_tokens = max_tokens
        self.action_regex = action_regex
        self.usage: dict = {}
        # One episode, one session: a backend with KV reuse keys the episode's views by it.
        self.session = uuid.uuid4().hex

    def act(self, messages: list[dict]) -> tuple[str, str]:
        session = {"session": self.session} if getattr(self.backend, "kv_reuse", False) else {}
        completion = self.backend.complete(messages, self.max_tokens, regex=self.action_regex, **session)
        self.usage = {"cached_tokens": completion.cached_tokens, "generated_tokens": completion.generated_tokens}
        return parse_reply(completion.text)


def model_agent(backend, max_tokens: int, task, policy) -> ModelAgent:
    """The agent for one episode, constrained to the task's commands and the policy's own."""
    return ModelAgent(backend, max_tokens, action_grammar(task.action_regex, getattr(policy, "action_regex", None)))


if __name__ == "__main__":
    from arc_vllm.agent.backends import VllmBackend
    from arc_vllm.offline import go_offline, in_process_engine
    from arc_vllm.policies.base import SYSTEM, prefix_messages

    go_offline()
    in_process_engine()
    backend = VllmBackend()
    task = "List the files here with `ls`, then read README.txt with `cat README.txt`."
    print(ModelAgent(backend).act(prefix_messages(SYSTEM, task)))
    backend.close()
