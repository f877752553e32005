"""Compaction owned by ARC, below the HTTP layer (``core/handoff.py``, ``serving/compaction*.py``),
in real tokens of the embedded model:

- over random conversations with compactions at random points (a client's own summary turn,
  whose rewritten history keeps ARC's handoff; a provider API's handle standing for the
  history): the handoff stays within its bound, is the same text for the same session, names
  every stored observation or says how to page to it; after each, the store rebuilds the
  whole ordered history, every id recalls exactly, and the view stays bounded;
- handles: issued and read back, bound to a caller, refused when forged or another
  server's, the server's secret kept in the store folder;
- clients' compaction turns recognised from the prompts Codex and Claude Code send (and an
  explicit marker), their prompt taken out before anything is archived.
"""

import asyncio
import json
import os

import pytest
from hypothesis import given, settings, strategies as st

from arc_vllm.core.config import ArcConfig
from arc_vllm.core.handoff import write_handoff
from arc_vllm.core.recall import recall_all
from arc_vllm.serving.compaction.handle import Handle, Handles, caller_tag
from arc_vllm.serving.compaction.turns import (PLAIN, SUMMARY_TAGS, answer_text, recognise,
                                               without_prompt)
from arc_vllm.serving.sessions.folder import FolderStorage
from arc_vllm.serving.sessions.session import Session
from arc_vllm.serving.sessions.storage import MemoryStorage
from arc_vllm.serving.errors import SessionError

from tests.helpers.histories import make_text

# What the clients send (Codex 0.169's templates/compact/prompt.md and summary_prefix.md; Claude
# Code 2.1's summary request opens so and asks for <analysis> and <summary> blocks).
CODEX_PROMPT = ("You are performing a CONTEXT CHECKPOINT COMPACTION. Create a handoff summary for another LLM "
                "that will resume the task.\n\nInclude:\n- Goal / user objective\n- Current progress and key "
                "decisions made\n")
CODEX_PREFIX = ("Another language model started to solve this problem and produced a summary of its thinking "
                "process. You also have access to the state of the tools that were used by that language model.")
CLAUDE_PROMPT = ("CRITICAL: Respond with TEXT ONLY. Do NOT call any tools.\n\nYour task is to create a detailed "
                 "summary of the conversation so far... wrap your analysis in <analysis> tags ... "
                 "<summary>\n1. Primary Request and Intent: ...\n</summary>")
CLAUDE_PREFIX = ("This session is being continued from a previous conversation that ran out of context. The "
                 "summary below covers the earlier portion of the conversation.\n\n")
TOOLS = [{"type": "function", "function": {"name": "run", "parameters": {"type": "object", "properties": {
    "cmd": {"type": "string"}}}}}]
HANDLES = Handles(b"a secret for the tests, not a real one")


def tool_turn(index: int, text: str) -> list[dict]:
    return [{"role": "assistant", "content": "", "tool_calls": [
                {"id": f"c{index}", "type": "function",
                 "function": {"name": "run", "arguments": json.dumps({"cmd": f"step {index}"})}}]},
            {"role": "tool", "tool_call_id": f"c{index}", "content": text}]


def new_session(counter, window: int = 4096) -> Session:
    return Session("sess_0123456789abcdef01234567", ArcConfig.for_window(window, 256), counter, None)


# A conversation: observations of random lengths; "turn": the client compacts on its own
# (its next history: task, ARC's handoff, what follows); "handle": a provider API's handle.
events = st.lists(st.one_of(st.tuples(st.just("observe"), st.integers(0, 9_000), st.integers(0, 2**20)),
                            st.tuples(st.just("turn")), st.tuples(st.just("handle"))),
                  min_size=1, max_size=24)


@settings(max_examples=25, deadline=None)
@given(events)
def test_compactions_at_random_points_lose_nothing(smol, history):
    session = new_session(smol)
    task = [{"role": "system", "content": "You are an agent."}, {"role": "user", "content": "Fix the build."}]
    sent, held, observations = list(task), 0, []   # what the client holds and sends next
    session.take_in(sent, TOOLS, save=False)
    for index, event in enumerate(history):
        if event[0] == "observe":
            text = make_text(event[2], event[1])
            sent += tool_turn(index, text)
            observations.append(text)
            session.take_in(sent, TOOLS, held=held, save=False)
        else:
            handle = HANDLES.issue(Handle(session.id, len(session.fingerprints), session.num_rebases, "c"))
            budget = session.context.config.handoff_budget_tokens
            handoff = write_handoff(session.context, budget_tokens=budget, handle=handle)
            assert handoff.tokens <= budget and smol.count(handoff.text) == handoff.tokens
            assert write_handoff(session.context, budget_tokens=budget, handle=handle).text == handoff.text
            ids = set(session.store.ids())
            assert handoff.listed <= ids and handoff.observations == len(ids)
            assert set(session.context.catalog_order()) == ids  # every id pages in the catalog
            if event[0] == "turn":  # the client's rewritten history holds ARC's handoff
                sent, held = task + [{"role": "user", "content": CODEX_PREFIX + "\n" + handoff.text}], 0
                session.take_in(sent, TOOLS, handoff=True, save=False)
                assert session.context.has_acted  # the note and the catalog from now on
            else:  # the client sends only the handle and what is new
                sent, held = [], len(session.fingerprints)
        view = session.context.render()
        assert view.tokens <= session.context.config.input_budget_tokens
    # The store's ordered history: every observation, in order (and the client's own messages
    # that followed F, here the handoffs it kept).
    assert [text for text in session.store.history() if not text.startswith(CODEX_PREFIX)] == observations
    for id in session.store.ids():
        assert recall_all(session.context.recall, id) == session.store.get(id).content


def test_a_handoff_names_the_task_the_newest_turns_and_how_to_recall(smol):
    session = new_session(smol, 8192)
    messages = [{"role": "user", "content": "Find why test_io fails."}]
    for index in range(12):
        messages += tool_turn(index, f"output {index}\n" * (400 if index % 3 == 0 else 3))
    session.take_in(messages, TOOLS, save=False)
    handoff = write_handoff(session.context, budget_tokens=1024, handle="arc1.handle.x")
    text = handoff.text
    assert "Find why test_io fails." in text and "_recall §" in text and "[ARC handle arc1.handle.x]" in text
    assert f'{json.dumps({"cmd": "step 11"})}' in text  # the newest turn
    assert handoff.tokens <= 1024 and handoff.observations == len(session.store)
    with pytest.raises(ValueError, match="at least"):
        write_handoff(session.context, budget_tokens=100)


def test_handles_are_bound_to_a_caller_and_refused_when_forged(tmp_path):
    handle = Handle("sess_0123456789abcdef01234567", 12, 0, caller_tag("ab" * 20), 5000)
    token = HANDLES.issue(handle)
    assert HANDLES.read(token) == handle
    assert HANDLES.find(f"summary ...\n[ARC handle {token}]") == handle
    for forged in (token[:-3] + "AAA", token.replace(token.split(".")[1], token.split(".")[1][::-1])):
        with pytest.raises(SessionError, match="signature|not a compaction handle") as error:
            HANDLES.read(forged)
        assert error.value.status == 400
    with pytest.raises(SessionError, match="another server"):
        Handles(b"another server's secret, sixteen+").read(token)
    with pytest.raises(SessionError, match="not a compaction handle"):
        HANDLES.read("a summary, not a handle")
    # The server's secret is kept in the store folder: a restart (or another replica) reads
    # the handles it issued.
    first = asyncio.run(Handles.for_server(None, FolderStorage(tmp_path)))
    assert asyncio.run(Handles.for_server(None, FolderStorage(tmp_path))).read(first.issue(handle)) == handle
    assert oct(os.stat(tmp_path / ".arc-secret").st_mode & 0o777) == "0o600"
    operators = [asyncio.run(Handles.for_server("an operator's --arc-secret", MemoryStorage())) for _ in range(2)]
    assert operators[0].read(operators[1].issue(handle)) == handle


@pytest.mark.parametrize("prompt, headers, client, form", [
    (CODEX_PROMPT, {}, "codex", PLAIN),
    ("Summarise.", {"x-codex-turn-metadata": json.dumps({"request_kind": "compaction"})}, "codex", PLAIN),
    (CLAUDE_PROMPT, {}, "claude-code", SUMMARY_TAGS),
    (CLAUDE_PROMPT + "\n\nIMPORTANT: your last answer had no <summary> block.", {}, "claude-code", SUMMARY_TAGS),
    ("Summarise, please.", {"x-arc-compaction": "summary-tags"}, "marked", SUMMARY_TAGS),
])
def test_clients_compaction_turns_are_recognised_and_their_prompt_never_archived(prompt, headers, client, form):
    messages = [{"role": "user", "content": "Fix the build."}, *tool_turn(0, "ok"),
                {"role": "user", "content": [{"type": "text", "text": prompt}]}]
    turn = recognise(headers, {}, messages)
    assert (turn.client, turn.form) == (client, form)
    assert without_prompt(messages, turn) == messages[:-1]
    answer = answer_text(turn, "HANDOFF")
    assert ("<summary>\nHANDOFF\n</summary>" in answer) == (form == SUMMARY_TAGS) and "HANDOFF" in answer


def test_a_quoted_prompt_or_an_ordinary_turn_is_no_compaction_turn():
    quoted = [{"role": "user", "content": CODEX_PROMPT}, {"role": "assistant", "content": "Sure."},
              {"role": "user", "content": "Now fix the build."}]
    assert recognise({}, {}, quoted) is None
    assert recognise({}, {}, [{"role": "user", "content": "CRITICAL: Respond with TEXT ONLY. Do NOT call any "
                                                          "tools."}]) is None  # no <summary> asked
    assert recognise({}, {"vllm_xargs": {"arc_compaction": "plain"}}, quoted).form == PLAIN
    with pytest.raises(SessionError, match="not one of"):
        recognise({"x-arc-compaction": "yes"}, {}, quoted)


def test_clearing_edits_cite_tool_results_and_drop_old_thinking_from_the_view_only(smol):
    """Anthropic's clear_tool_uses and clear_thinking as ARC applies them: the cleared results
    show as citation stubs (each recallable exactly), the excluded tool and the newest ``keep``
    stay verbatim, too little to clear clears nothing; thinking leaves the view, not the store."""
    session = new_session(smol, 16384)
    messages = [{"role": "user", "content": "Fix the build."}]
    for index in range(6):
        turn = tool_turn(index, f"result {index}\n" * 200)
        turn[0]["reasoning"] = f"THINKING-{index}"
        if index == 1:
            turn[0]["tool_calls"][0]["function"]["name"] = "keep_me"
        messages += turn
    session.take_in(messages, TOOLS, save=False)
    context = session.context
    assert context.clear_tool_results(2, frozenset({"keep_me"}), at_least_tokens=10**6) == (0, 0)
    cleared, tokens = context.clear_tool_results(2, frozenset({"keep_me"}))
    assert cleared == 3 and tokens > 0  # steps 0, 2, 3: not keep_me's, not the newest two
    text = json.dumps(context.render().messages, ensure_ascii=False)
    for index in (1, 4, 5):
        assert f"result {index}\\n" * 200 in text  # verbatim
    for index in (0, 2, 3):
        assert f"result {index}\\n" * 200 not in text
        id = session.context.turns[index].obs_id
        assert f"§{id}" in text and recall_all(context.recall, id) == f"result {index}\n" * 200
    assert context.has_acted  # ARC changed the view: its note and recall tools from now on
    # SmolLM2's template renders no reasoning: clearing it frees nothing of the prompt (with
    # Qwen3's it does: tests/test_thinking.py).
    turns, freed = context.clear_thinking(1)
    assert turns == 5 and freed == 0
    assert context.clear_thinking(1) == (0, 0)  # once
    shown = [message.get("reasoning") for message in context.render().messages if message.get("reasoning")]
    assert shown == ["THINKING-5"]  # on the turns, only the newest is left
    for turn in context.turns[:5]:  # each cleared thought stays stored, listed, and comes back exactly
        assert turn.thinking_id in context.catalog and recall_all(context.recall, turn.thinking_id) == turn.reasoning
