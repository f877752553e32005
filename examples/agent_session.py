"""A minimal agent session against `arc-vllm serve` with the OpenAI client.

Start the server (`make run`), then:  .venv/bin/python examples/agent_session.py

The agent reads files through a `cat` tool. Every tool result goes to the server, which
archives it in the session's store and shows the model a bounded view: old outputs become
citation stubs (§id) that the model can take back with `_recall §id`, served inside the
server. The client is plain: it names no session (ARC finds it by the conversation) and reads
the one it got from the `X-ARC-Session` header. The script prints what ARC did on each turn.
"""

import json
import sys
import urllib.request

from openai import OpenAI

BASE = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8000"
FILES = {f"notes_{i}.txt": "".join(f"note {i}.{n}: nothing unusual\n" for n in range(150))
         for i in range(6)}
FILES["notes_2.txt"] = FILES["notes_2.txt"].replace("note 2.75: nothing unusual",
                                                    "note 2.75: THE KEY IS 7391")

client = OpenAI(base_url=f"{BASE}/v1", api_key="none")
model = client.models.list().data[0].id

messages = [{"role": "system", "content": "You are a careful agent. Use the cat tool."},
            {"role": "user", "content": "Read every notes file, then tell me the key."}]
for turn, path in enumerate(sorted(FILES)):
    # This small model is not trained for tool calls, so the agent picks the next file itself
    # and the model comments on it; a tool-calling model would choose the call.
    call = {"id": f"call{turn}", "type": "function",
            "function": {"name": "cat", "arguments": json.dumps({"path": path})}}
    messages.append({"role": "assistant", "content": f"I will read {path}.", "tool_calls": [call]})
    messages.append({"role": "tool", "tool_call_id": call["id"], "content": FILES[path]})
    raw = client.chat.completions.with_raw_response.create(model=model, messages=messages, max_tokens=40)
    response, session = raw.parse(), raw.headers["X-ARC-Session"]
    arc = response.model_extra["arc"]
    print(f"turn {turn} (session {session}): conversation {arc['conversation_tokens']} tokens -> view "
          f"{arc['view_tokens']} (budget {arc['budget_tokens']}), compactions {arc['compactions']}, "
          f"recalls {arc['recalls']}, cached {arc['prefix_cached_tokens']}")
    messages.append({"role": "assistant", "content": response.choices[0].message.content or ""})

info = json.loads(urllib.request.urlopen(f"{BASE}/v1/arc/sessions/{session}").read())
print(f"stored {info['observations']} observations ({info['payload_bytes']} bytes); "
      f"catalog: {BASE}/v1/arc/sessions/{session}/catalog?page=1")
print("model's last answer:", response.choices[0].message.content)
