"""The scripted agent: it sees only the rendered prompt and follows the task protocol.

It isolates the mechanism: whether the needle is still reachable from what the policy shows,
as visible text or through a §id it can recall. Each turn it decides from the prompt alone:

1. read the next file of the task's list (the file after the newest ``cat`` it can see);
2. after the last file: submit the needle if ``NEEDLE=...`` is visible;
3. else follow ARC's newest instruction for the next chunk, or recall the §id whose stub
   names ``cat secrets.txt``, or turn the catalog page while it has not wrapped; a chunk
   cut may fall inside the needle's line, so before asking for the next chunk it notes the
   last line fragment it saw in its thought (its only memory beyond the prompt) and joins
   it with the first line of the next chunk;
4. else give up (no answer).

``act`` returns (thought, action).

Run ``python -m arc_vllm.evaluation.scripted`` for one scripted NIAH episode per policy.
"""

from __future__ import annotations

import re

from arc_vllm.evaluation.niah import ALPHABET, NEEDLE_LENGTH
from arc_vllm.core import formats
from arc_vllm.core.commands import CATALOG, RECALL

NEEDLE = re.compile(rf"NEEDLE=([{ALPHABET}]{{{NEEDLE_LENGTH}}})(?![{ALPHABET}])")
ORDER = re.compile(r"in this order with `cat FILE`: (.+?)\. One of them")
READ = formats.READ_ACTION
SECRETS_STUB = re.compile(formats.STUB_OF.format(signature=re.escape("cat secrets.txt")))
NEXT_CHUNK = formats.NEXT_CHUNK
CHUNK = formats.RECALLED_CHUNK
NOTED = re.compile(r"chunk tail: ([^\n]*)")
GIVE_UP = "give up"


class ScriptedAgent:
    def act(self, messages: list[dict]) -> tuple[str, str]:
        text = "\n".join(message.get("content") or "" for message in messages)
        order = [name.strip() for name in ORDER.search(messages[1]["content"]).group(1).split(",")]
        read = READ.findall(text)
        newest = read[-1] if read else None
        if newest != order[-1]:
            position = order.index(newest) + 1 if newest in order else 0
            return "", f"cat {order[position]}"
        found = NEEDLE.findall(text)
        if found:
            return "", f"submit NEEDLE={found[-1]}"
        bodies = [(int(number), total, body) for _, number, total, body in CHUNK.findall(text)]
        for tail in NOTED.findall(text):
            for _, _, body in bodies:
                joined = NEEDLE.findall(tail + body.split("\n", 1)[0])
                if joined:
                    return "", f"submit NEEDLE={joined[-1]}"
        unfinished = [body for number, total, body in bodies if number < int(total)]
        thought = f"chunk tail: {unfinished[-1].rsplit(chr(10), 1)[-1]}" if unfinished else ""
        chunks = [command for command in NEXT_CHUNK.findall(text) if not formats.tried(command, text)]
        if chunks:
            return thought, chunks[-1]
        stub = SECRETS_STUB.search(text)
        if stub and not formats.tried(f"{RECALL} §{stub.group(1)}", text):  # not tried yet
            return thought, f"{RECALL} §{stub.group(1)}"
        if formats.CATALOG_PAGE_MARK in text and formats.CATALOG_WRAPPED not in text:
            return thought, f"{CATALOG} next"
        return thought, GIVE_UP


if __name__ == "__main__":
    from arc_vllm.agent.loop import run_episode
    from arc_vllm.core.config import ArcConfig
    from arc_vllm.core.tokens import load_counter
    from arc_vllm.evaluation.niah import make_task
    from arc_vllm.policies import MODEL_POLICIES, POLICIES, make_policy

    counter = load_counter(None)
    config = ArcConfig.for_window(4096, 512)
    task = make_task(42, 0)
    for name in POLICIES:
        if name in MODEL_POLICIES:
            continue  # they need a model backend: arc-vllm bench niah --backend vllm
        policy = make_policy(name, counter, config.input_budget_tokens, task=task.prompt, config=config)
        result = run_episode(policy, task, ScriptedAgent(), counter, config.input_budget_tokens, force=(5, 10, 15))
        print({key: value for key, value in result.items() if key != "trace"})
