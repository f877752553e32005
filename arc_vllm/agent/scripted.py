"""The scripted agent: it sees only the rendered prompt and follows the task protocol.

It isolates the mechanism: whether the needle is still reachable from what the policy shows,
as visible text or through a §id it can recall. Each turn it decides from the prompt alone:

1. read the next file of the task's list (the file after the newest ``cat`` it can see);
2. after the last file: submit the needle if ``NEEDLE=...`` is visible;
3. else follow ARC's newest instruction for the next chunk, or recall the §id whose stub
   names ``cat secrets.txt``, or turn the catalog page while it has not wrapped; when a
   recalled chunk ends inside the needle, it notes the part it saw in its thought (the only
   memory it has beyond the prompt) and joins it with the start of the next chunk;
4. else give up (no answer).

``act`` returns (thought, action).

Run ``python -m arc_vllm.agent.scripted`` for a decision on a small prompt.
"""

from __future__ import annotations

import re

from arc_vllm.agent.niah import ALPHABET, NEEDLE_LENGTH

NEEDLE = re.compile(rf"NEEDLE=([{ALPHABET}]{{{NEEDLE_LENGTH}}})(?![{ALPHABET}])")
ORDER = re.compile(r"in this order with `cat FILE`: (.+?)\. One of them")
READ = re.compile(r"Action: cat (\S+)")
SECRETS_STUB = re.compile(r"§([0-9a-f]{8,40}) · cat secrets\.txt")
NEXT_CHUNK = re.compile(r"next: `(_recall §[0-9a-f]+ \d+)`")
PARTIAL_AT_CHUNK_END = re.compile(rf"NEEDLE=([{ALPHABET}]{{1,{NEEDLE_LENGTH - 1}}})\n<<< end §")
NOTED = re.compile(rf"partial NEEDLE=([{ALPHABET}]+)")
CHUNK_START = re.compile(rf"<<< §[0-9a-f]+ chunk \d+/\d+ >>>\n([{ALPHABET}]*)")
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
        for noted in NOTED.findall(text)[::-1]:
            missing = NEEDLE_LENGTH - len(noted)
            for start in CHUNK_START.findall(text):
                if len(start) >= missing:
                    return "", f"submit NEEDLE={noted}{start[:missing]}"
        partial = PARTIAL_AT_CHUNK_END.findall(text)
        thought = f"partial NEEDLE={partial[-1]}" if partial else ""
        chunks = [command for command in NEXT_CHUNK.findall(text) if f"Action: {command}" not in text]
        if chunks:
            return thought, chunks[-1]
        stub = SECRETS_STUB.search(text)
        if stub and f"Action: _recall §{stub.group(1)}" not in text:  # not tried yet
            return thought, f"_recall §{stub.group(1)}"
        if "[ARC catalog page" in text and "wrapped around" not in text:
            return thought, "_catalog next"
        return thought, GIVE_UP


if __name__ == "__main__":
    prompt = [{"role": "system", "content": "s"},
              {"role": "user", "content": "Read these files in this order with `cat FILE`: a.txt, b.txt. ..."},
              {"role": "assistant", "content": "Action: cat a.txt"},
              {"role": "user", "content": "Observation:\nNEEDLE=ABCDEFGHJKLMNPQRSTUVWXYZ"}]
    print(ScriptedAgent().act(prompt))
