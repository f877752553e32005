"""The coding CLIs people point at vLLM, pinned from npm (``scripts/setup.sh`` installs them
into ``$ARC_VLLM_CACHE/npm``), through ARC:

- ``@anthropic-ai/claude-code`` (``claude -p``, the Anthropic Messages API, streamed) and
  ``@openai/codex`` (``codex exec`` with a Responses provider, streamed) each complete a
  round trip, inside a loopback-only network namespace with the server in it
  (``tests/helpers/cli_round_trip.py``), and ARC records the session under the client's own id;
- Codex with a provider named "OpenAI" compacts remotely (``compaction_trigger``), answered
  with ARC's compaction item, which continues the session;
- then each compacts twice on its own, its window set small as a local model's user sets it
  (``claude -p /compact --continue``; ``codex exec resume`` with ``model_context_window``):
  ARC answers each compaction turn from the store (0 tokens decoded, no engine call), Claude
  Code sends no retry, the prompt is never archived, and the next requests continue the same
  session with ARC's view (its note and catalog);
- each in a conversation of its own where the user writes again (``--continue``, ``exec resume``)
  with a second instruction, then pastes two logs of ~14k tokens so that ARC compacts the 32k
  window: the second instruction is verbatim in every later view, an older paste is shown by its
  head and stub line and comes back whole by its id, the newest message is whole;
- their first request bodies, recorded from those versions (``tests/fixtures/clients/``,
  ``record.py`` beside them), grown turn by turn with tool results past the 32k window: every
  view within the budget, one session under the client's id, every observation back exactly.

The tiny model serves them at a 32k window (their first requests are 10-13k tokens); its
answers end after a few tokens (``tests/helpers/short_answers.py``), as a real model's would.
"""

import hashlib
import json
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from arc_vllm.paths import npm_bin_dir
from arc_vllm.ray_cluster import isolated_command

pytestmark = [pytest.mark.slow, pytest.mark.memory(2)]  # the two CLIs' Node.js processes
REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures" / "clients"
WINDOW = 32768
# Turns of ~6.8k-token tool output each, after a first request of 10-13k tokens: 10 take the
# conversation past twice the window (78k and 81k tokens), so ARC compacts. 16 took twice as
# long for no more that is checked (each turn a prefill near the view's budget: 2 to 3 s as the
# AVX2 class, whose bfloat16 attention has no AMX).
GROWN_TURNS = 10


def needs_clis():
    missing = [name for name in ("claude", "codex") if not (npm_bin_dir() / name).exists()]
    if missing or shutil.which("unshare") is None:
        pytest.fail(f"the coding CLIs are set up by scripts/setup.sh (npm); missing: {missing or ['unshare']}")


@pytest.fixture(scope="module")
def round_trips(tmp_path_factory):
    needs_clis()
    folder = tmp_path_factory.mktemp("clis")
    done = subprocess.run(isolated_command([sys.executable, str(REPO / "tests/helpers/cli_round_trip.py"), str(folder),
                                            "--compact", "--humans"]),
                          capture_output=True, text=True, timeout=2400)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def test_claude_code_completes_a_round_trip_through_arc(round_trips):
    claude = round_trips["claude"]
    assert claude["rc"] == 0, claude
    [session] = [s for s in round_trips["sessions"] if s["client_id"] == claude["session_id"]]
    records = session["records"]
    assert records and {record["api"] for record in records} == {"messages"}
    assert all(record["stream"] and record["view_tokens"] <= record["budget_tokens"] for record in records)
    assert records[0]["conversation_tokens"] > 8000  # its system prompt and tools: F is large


def test_codex_completes_a_round_trip_through_arc(round_trips):
    codex = round_trips["codex"]
    assert codex["rc"] == 0 and codex["thread_id"], codex
    [session] = [s for s in round_trips["sessions"] if s["client_id"] == codex["thread_id"]]
    records = session["records"]
    assert records and {record["api"] for record in records} == {"responses"}
    assert all(record["stream"] and record["view_tokens"] <= record["budget_tokens"] for record in records)
    assert records[0]["conversation_tokens"] > 6000


def session_of_client(round_trips, client_id: str) -> dict:
    [session] = [s for s in round_trips["sessions"] if s["client_id"] == client_id]
    return session


@pytest.mark.parametrize("cli", ["claude", "codex"])
def test_the_clis_own_compactions_are_answered_by_arc_and_lose_nothing(round_trips, cli):
    runs = round_trips[f"{cli}_compact"]
    assert all(run["rc"] == 0 for run in runs), runs
    key = "session_id" if cli == "claude" else "thread_id"
    session = session_of_client(round_trips, round_trips[cli][key])
    records = session["records"]
    turns = [record for record in records if record.get("handoff") == "turn"]
    # Two compactions, each ARC's: no engine call, nothing decoded; no retry (Claude Code
    # asks again when an answer has no <summary>): one compaction request per /compact.
    assert len(turns) == 2 and session["handoffs"] == 2
    assert all(record["engine_calls"] == 0 for record in turns)
    assert session["prompt_hits"] == 0  # the compaction prompt was never archived
    # Each compaction is followed by a request of the same session, on ARC's view.
    after = [records[index + 1] for index, record in enumerate(records[:-1]) if record.get("handoff") == "turn"]
    assert len(after) == 2 and all(record["engine_calls"] >= 1 and record.get("handoff") is None for record in after)
    assert session["view"]["compacted"] and session["view"]["tokens"] <= session["view"]["budget_tokens"]
    assert all(record["view_tokens"] <= record["budget_tokens"] for record in records)


def test_codexs_remote_compaction_is_answered_with_arcs_item_and_continues_the_session(round_trips):
    """A provider named "OpenAI": Codex compacts remotely (a compaction_trigger item), keeps
    the compaction item, and sends it with what is new: ARC answers with its handle, with no
    engine call, and expands the history before it from the store."""
    runs = round_trips["codex_remote"]
    assert all(run["rc"] == 0 for run in runs), runs
    session = session_of_client(round_trips, runs[0]["thread_id"])
    records = session["records"]
    triggers = [index for index, record in enumerate(records) if record.get("handoff") == "trigger"]
    assert len(triggers) == 2 and all(records[index]["engine_calls"] == 0 for index in triggers)
    assert all(records[index + 1]["engine_calls"] >= 1 for index in triggers)
    assert session["rebases"] == 0  # the item continued the session: nothing rewritten, nothing lost
    assert all(record["view_tokens"] <= record["budget_tokens"] for record in records)


def post(server, path: str, body: dict, headers: dict):
    request = urllib.request.Request(server.base + path, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json", **headers})
    with urllib.request.urlopen(request, timeout=600) as response:
        return response.read().decode()


def events(text: str) -> list[dict]:
    return [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: ") and line[6:] != "[DONE]"]


def output(index: int) -> str:
    return "".join(f"src/module_{index}/file_{n}.py: {n * 31 % 977} lines, last change {n % 28 + 1} Nov\n"
                   for n in range(260))


def visible_id(signature: str, observation: str) -> str:
    return hashlib.sha1(signature.encode() + b"\x1f" + observation.encode()).hexdigest()[:8]


def check_session(server, arcs: list[dict], client_id: str, stored: dict[str, str]):
    [sid] = {arc["session"] for arc in arcs}
    assert all(arc["view_tokens"] <= arc["budget_tokens"] for arc in arcs)
    assert arcs[-1]["conversation_tokens"] > 2 * WINDOW and sum(arc["compactions"] for arc in arcs) >= 1
    with urllib.request.urlopen(f"{server.base}/v1/arc/sessions/{sid}") as response:
        info = json.loads(response.read())
    assert info["client_id"] == client_id and info["rebases"] == 0
    for id, body in stored.items():
        with urllib.request.urlopen(f"{server.base}/v1/arc/sessions/{sid}/observations/{id}") as response:
            assert response.read().decode() == body


def test_claude_codes_first_request_grown_past_the_window(wide_server):
    """Claude Code's recorded first request (system blocks with cache_control, 12 tools, a
    system message inside ``messages``, ``max_tokens`` 32000, ``thinking``, streamed), grown
    with Bash calls and their results, its cache_control mark moved to the newest message."""
    recorded = json.loads((FIXTURES / "claude_code_first_request.json").read_text())
    body, headers = recorded["body"], {"x-api-key": "local", **recorded["headers"]}
    session_id = headers["x-claude-code-session-id"]
    arcs, stored = [], {}
    for index in range(GROWN_TURNS):
        command = {"command": f"ls -la src/module_{index}", "description": "List files"}
        for message in body["messages"]:
            for block in message["content"] if isinstance(message["content"], list) else []:
                block.pop("cache_control", None)
        body["messages"] += [
            {"role": "assistant", "content": [{"type": "text", "text": f"Listing module {index}."},
                                              {"type": "tool_use", "id": f"toolu_{index:02d}", "name": "Bash", "input": command}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_{index:02d}", "content": output(index)},
                                         {"type": "text", "text": "<system-reminder>keep going</system-reminder>",
                                          "cache_control": {"type": "ephemeral"}}]}]
        stored[visible_id(f"Bash({json.dumps(command)})", output(index))] = output(index)
        answer = events(post(wide_server, "/v1/messages?beta=true", body, headers))
        assert answer[0]["type"] == "message_start" and answer[-1]["type"] == "message_stop"
        [delta] = [event for event in answer if event["type"] == "message_delta"]
        arc = delta["arc"]
        # 32000 asked: granted as plain vLLM grants it; once ARC acts, the view leaves a quarter.
        assert arc["max_tokens"] == min(32000, WINDOW - arc["view_tokens"])
        if any(earlier["compactions"] for earlier in arcs + [arc]):
            assert arc["max_tokens"] >= WINDOW // 4
        arcs.append(arc)
        text = "".join(event["delta"].get("text", "") for event in answer if event["type"] == "content_block_delta")
        body["messages"].append({"role": "assistant", "content": [{"type": "text", "text": text or "ok"}]})
        body["messages"].append({"role": "user", "content": [{"type": "text", "text": "continue"}]})
    check_session(wide_server, arcs, session_id, stored)


def test_codexs_first_request_grown_past_the_window(wide_server):
    """Codex's recorded first request (developer messages, 9 tools with a namespace and a
    built-in web_search, ``store: false``, ``reasoning``, ``include``, its ``prompt_cache_key``),
    the whole input resent each turn with exec_command calls and their output."""
    recorded = json.loads((FIXTURES / "codex_first_request.json").read_text())
    body, headers = recorded["body"], {"Authorization": "Bearer local", **recorded["headers"]}
    arcs, stored = [], {}
    for index in range(GROWN_TURNS):
        arguments = json.dumps({"cmd": f"ls -la src/module_{index}"})
        body["input"] += [{"type": "function_call", "call_id": f"call_{index:02d}", "name": "exec_command", "arguments": arguments},
                          {"type": "function_call_output", "call_id": f"call_{index:02d}", "output": output(index)}]
        stored[visible_id(f"exec_command({arguments})", output(index))] = output(index)
        answer = events(post(wide_server, "/v1/responses", body, headers))
        assert answer[0]["type"] == "response.created" and answer[-1]["type"] == "response.completed"
        final = answer[-1]["response"]
        arcs.append(final["arc"])
        body["input"] += [item for item in final["output"] if item["type"] in ("message", "function_call")]
        body["input"].append({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "continue"}]})
    check_session(wide_server, arcs, body["prompt_cache_key"], stored)


@pytest.mark.parametrize("cli", ["claude", "codex"])
def test_the_users_second_instruction_stays_verbatim_through_arcs_compaction(round_trips, cli):
    from arc_vllm.core.transcript import HUMAN_SIGNATURE
    from tests.helpers.conversations import visible_id
    from tests.helpers.human_turns import how_shown

    humans = round_trips["humans"][cli]
    runs, texts = humans["runs"], humans["texts"]
    assert all(run["rc"] == 0 for run in runs), [run["stderr"] for run in runs]
    second, paste_1 = texts[1], texts[2]
    for number, run in enumerate(runs[1:], start=1):
        view = run["view"]
        assert view["tokens"] <= view["budget_tokens"]
        assert how_shown(view["messages"], second, visible_id(HUMAN_SIGNATURE, second)) == "verbatim", number
        # The newest user message whole (the CLI may add its own context around it).
        assert how_shown(view["messages"], texts[number], visible_id(HUMAN_SIGNATURE, texts[number])) == "verbatim"
        assert view["human_messages"]  # the inspector marks them
    last = runs[-1]
    assert last["session"]["compactions"] > 0 and last["view"]["compacted"]  # ARC had to act
    paste_id = visible_id(HUMAN_SIGNATURE, paste_1)
    assert how_shown(last["view"]["messages"], paste_1, paste_id) == "head"
    assert last["view"]["human_turns"]["shortened"] >= 1
    # Every message the user sent after the task is stored whole: its id returns it exactly.
    assert humans["recalled"] == {text: text for text in texts[1:]}
