"""The agent's thinking (``core/thinking.py``): every thought stored and exactly recallable; the
thinking of the tool loop the model is in (the turns since the user last spoke) in every view,
whole or by a stub whose id returns it, the newest whole; between compactions a shown thought
never changes. Over random tool loops with thinking on random turns and the user speaking at
random steps, in real tokens of a reasoning model's tokenizer and template (DeepSeek-R1's
tokenizer with Qwen3's template, which renders the current loop's thinking), with K <= L."""

import json

import pytest
from hypothesis import event as note, given, settings, strategies as st

from arc_vllm.core.config import ArcConfig
from arc_vllm.core.formats import THINKING_SIGNATURE
from arc_vllm.core.recall import recall_all
from arc_vllm.core.snapshot import restore, snapshot
from arc_vllm.core.thinking import STUB, WHOLE
from arc_vllm.serving.sessions.session import Session

from tests.helpers.conversations import visible_id
from tests.helpers.histories import make_text

TOOLS = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object", "properties": {
    "command": {"type": "string"}}}}}]


def thought(number: int, seed: int, length: int) -> str:
    return f"THOUGHT-{number}: " + make_text(seed, length)


def tool_turn(index: int, body: str, reasoning: str | None) -> list[dict]:
    call = {"id": f"call_{index}", "type": "function",
            "function": {"name": "bash", "arguments": json.dumps({"command": f"cat f{index}.py"})}}
    assistant = {"role": "assistant", "content": None, "tool_calls": [call]}
    if reasoning is not None:
        assistant["reasoning"] = reasoning
    return [assistant, {"role": "tool", "tool_call_id": f"call_{index}", "content": body}]


def where_shown(context, view, index: int) -> str | None:
    """How the view shows the thought of turn ``index``: "whole" (an assistant message's
    reasoning is it), "stub" (its id is in the view: a stub, or its turn's line in S), "catalog"
    (its turn's line was left out of S, and the catalog lists it) or None."""
    turn = context.turns[index]
    if any(message.get("reasoning") == turn.reasoning for message in view.messages):
        return "whole"
    if f"§{turn.thinking_id}" in json.dumps(view.messages, ensure_ascii=False):
        return "stub"
    if index < context.state.elided and turn.thinking_id in context.catalog:
        return "catalog"
    return None


def check_view(context, view) -> None:
    """K <= L in real tokens; the current loop's thoughts whole or by their id while their turns
    are in H (by their id in S after, or listed once S leaves their line out), the newest
    turn's whole; every thought's id in the view or in the catalog."""
    assert view.tokens <= context.limit_tokens
    assert context.counter.count_messages(view.messages, context.tools) == view.tokens
    for index in range(context.loop_start, len(context.turns)):
        if context.turns[index].thinking_id:
            shown = where_shown(context, view, index)
            assert shown in (("whole", "stub") if index >= context.state.boundary else ("whole", "stub", "catalog")), \
                f"the loop's thought of turn {index} left the view ({shown})"
    newest = context.turns[-1]
    if newest.thinking_id and len(context.turns) > context.loop_start and context.thinking.tokens(newest) <= context.budgets.thinking:
        # (one larger than T's cap may be stubbed as the view's last resort: one of 3,000
        # tokens in a 4k window cannot be whole)
        assert where_shown(context, view, len(context.turns) - 1) == "whole", "the newest turn's thought is not whole"
    for index, turn in enumerate(context.turns):  # every thought's id is in the view or listed
        if turn.thinking_id and where_shown(context, view, index) is None:
            assert turn.thinking_id in context.catalog, f"thought of turn {index} unreachable"


events = st.lists(st.one_of(
    st.tuples(st.just("tool"), st.one_of(st.integers(0, 300), st.integers(300, 3_000), st.integers(3_000, 12_000)),
              st.one_of(st.none(), st.integers(20, 400), st.integers(400, 4_000)), st.integers(0, 2**20)),
    st.tuples(st.just("tool"), st.integers(0, 600), st.integers(600, 4_000), st.integers(0, 2**20)),  # think-heavy
    st.tuples(st.just("human"), st.integers(10, 400), st.one_of(st.none(), st.integers(20, 600)), st.integers(0, 2**20)),
    st.tuples(st.just("compact"))), min_size=4, max_size=40)


@settings(max_examples=100, deadline=None)
@given(history=events, window=st.sampled_from([(4096, 512), (8192, 512), (16384, 1024)]))
def test_the_loops_thinking_stays_in_every_view_and_every_thought_comes_back(reasoning_counter, history, window):
    session = Session("sess_thinking", ArcConfig.for_window(*window), reasoning_counter, None)
    messages = [{"role": "system", "content": "You are a coding agent."}, {"role": "user", "content": "Fix the bug."}]
    stored, previous, thoughts = {}, None, 0
    for index, event in enumerate(history):
        if event[0] == "compact":
            if session.context is not None:
                session.context.compact()
            continue
        reasoning = None if event[2] is None else thought(thoughts, event[3], event[2])
        thoughts += reasoning is not None
        if event[0] == "tool":
            body = make_text(event[3] + 1, event[1])
            messages += tool_turn(index, body, reasoning)
            stored[visible_id(f'bash({json.dumps({"command": f"cat f{index}.py"})})', body)] = body
        else:
            said = {"role": "assistant", "content": "Done. What next?"}
            if reasoning is not None:
                said["reasoning"] = reasoning
            messages += [said, {"role": "user", "content": f"HUMAN-{index}: " + make_text(event[3], event[1])}]
        if reasoning is not None:
            stored[visible_id(THINKING_SIGNATURE, reasoning)] = reasoning
        session.take_in(messages, TOOLS, save=False)
        context = session.context
        compactions = context.num_compactions
        view = context.render()
        check_view(context, view)
        if previous is not None and context.num_compactions == compactions and not view.compacted \
                and previous[1] == compactions and not context.recall.materialized:
            # No compaction since the last view: it is a prefix of this one, thinking included.
            assert view.messages[:len(previous[0])] == previous[0]
        previous = (view.messages, context.num_compactions)
    if session.context is None:
        return
    context = session.context
    note(f"compactions: {min(context.num_compactions, 3)}{'+' if context.num_compactions > 3 else ''}")
    note(f"thought stubs shown: {any(form == STUB for form in context.thinking.forms.values())}")
    for id, text in stored.items():
        assert recall_all(context.recall, id) == text
    # The store's history is every thought, then its observation, in order.
    expected = []
    for message in messages[2:]:
        if message.get("reasoning"):
            expected.append(message["reasoning"])
        if message["role"] in ("tool", "user"):
            expected.append(message["content"])
    assert context.store.history() == expected


def plain_thought(index: int, chars: int) -> str:
    words = f"THOUGHT-{index}: file {index} shows the retry budget; next I read file {index + 1}. "
    return (words * (chars // len(words) + 1))[:chars]


def long_loop(session, steps: int, thought_chars: int = 900, body_lines: int = 60):
    messages = [{"role": "system", "content": "You are a coding agent."}, {"role": "user", "content": "Fix the bug."}]
    for index in range(steps):
        messages += tool_turn(index, f"line {index}\n" * body_lines, plain_thought(index, thought_chars))
        session.take_in(messages, TOOLS, save=False)
        view = session.context.render()
    return messages, view


def test_over_its_cap_the_loops_oldest_thoughts_show_their_id_and_head(reasoning_counter):
    """A 16k window, a loop of 30 steps with ~1,000-token thoughts: after compaction the newest
    thoughts are whole within T's cap, the older ones of the loop in H show the id first, then
    their head; each id returns its thought exactly; turns in S name their thought's id."""
    session = Session("sess_cap", ArcConfig.for_window(16384, 1024), reasoning_counter, None)
    _, view = long_loop(session, 30, thought_chars=3000, body_lines=20)
    context = session.context
    assert context.num_compactions > 0
    forms = {index: context.thinking.form(index, context._forms.get(index, 0))
             for index in range(context.state.boundary, len(context.turns))}
    assert forms[len(context.turns) - 1] == WHOLE
    whole = [index for index, form in forms.items() if form == WHOLE]
    stubs = [index for index, form in forms.items() if form == STUB]
    assert stubs and max(stubs) < min(whole)  # the oldest of the loop give way first
    fitted = sorted(index for index, form in context.thinking.forms.items() if form == WHOLE)  # at the compaction
    assert sum(context.thinking.tokens(context.turns[index]) for index in fitted[:-1]) <= context.budgets.thinking
    for index in stubs:
        turn = context.turns[index]
        [shown] = [message["reasoning"] for message in view.messages
                   if message.get("reasoning") and f"§{turn.thinking_id}" in message["reasoning"]]
        assert shown.startswith(f"[ARC · thought §{turn.thinking_id},") and turn.reasoning[:20] in shown
        assert recall_all(context.recall, turn.thinking_id) == turn.reasoning
    summary = json.dumps(view.messages, ensure_ascii=False)
    for turn in context.turns[context.state.elided:context.state.boundary]:
        assert f"thinking §{turn.thinking_id}" in summary


def test_a_new_human_turn_changes_no_shown_thought_until_a_compaction(reasoning_counter):
    """The user speaking ends the loop, but the earlier loop's thoughts stay as shown (the prefix
    cache holds), and a later compaction lets them leave the view, listed in the catalog."""
    session = Session("sess_human", ArcConfig.for_window(8192, 512), reasoning_counter, None)
    messages, before = long_loop(session, 9, thought_chars=600, body_lines=40)
    context = session.context
    compactions = context.num_compactions
    messages += [{"role": "assistant", "content": "Done.", "reasoning": "All files read."},
                 {"role": "user", "content": "Now run the tests."}]
    session.take_in(messages, TOOLS, save=False)
    after = context.render()
    if context.num_compactions == compactions:
        assert after.messages[:len(before.messages)] == before.messages
    context.compact()
    view = context.render()
    check_view(context, view)
    for index, turn in enumerate(context.turns[:context.loop_start]):
        if turn.thinking_id and where_shown(context, view, index) is None:
            assert turn.thinking_id in context.catalog


def test_a_snapshot_keeps_the_thoughts_forms(reasoning_counter):
    session = Session("sess_snap", ArcConfig.for_window(4096, 512), reasoning_counter, None)
    long_loop(session, 12)
    context = session.context
    assert context.thinking.forms
    again = restore(context.config, context.counter, context.store, context.prefix, context.tools, snapshot(context),
                    note=context.note)
    assert again.render().messages == context.render().messages
    assert [turn.thinking_id for turn in again.turns] == [turn.thinking_id for turn in context.turns]


def test_a_conversation_without_thinking_stores_and_shows_as_before(smol):
    """No reasoning anywhere: no thought stored, no form kept, no snapshot key, no S line."""
    session = Session("sess_plain", ArcConfig.for_window(4096, 512), smol, None)
    messages = [{"role": "user", "content": "Fix the bug."}]
    for index in range(12):
        messages += tool_turn(index, f"line {index}\n" * 80, None)
    session.take_in(messages, TOOLS, save=False)
    context = session.context
    view = context.render()
    assert context.num_compactions > 0 and len(context.store) == 12
    assert not context.thinking.forms and "thinking_forms" not in snapshot(context)
    assert all("thinking_id" not in turn.state() for turn in context.turns)
    assert "thinking §" not in json.dumps(view.messages) and not any("reasoning" in m for m in view.messages)


@pytest.mark.parametrize("keep", [0, 1])
def test_cleared_thinking_leaves_the_turns_but_stays_stored_and_listed(reasoning_counter, keep):
    """Anthropic's clear_thinking in ARC: the thoughts leave their turns (freeing real tokens
    where the template renders them), each stays stored and listed in the catalog."""
    session = Session("sess_clear", ArcConfig.for_window(16384, 1024), reasoning_counter, None)
    messages, _ = long_loop(session, 5, thought_chars=400, body_lines=10)
    context = session.context
    cleared, freed = context.clear_thinking(keep)
    assert cleared == 5 - keep and freed > 0
    shown = [message["reasoning"] for message in context.render().messages if message.get("reasoning")]
    assert shown == [turn.reasoning for turn in context.turns[5 - keep:]]
    for turn in context.turns[:5 - keep]:
        assert turn.thinking_id in context.catalog and recall_all(context.recall, turn.thinking_id) == turn.reasoning
