"""A human turn is not an observation: in a conversation with native tool calls the user's own
messages stay in every view, verbatim or by their head and stub line, never a bare id; the
newest always whole. Over random tool loops in real tokens of the embedded model, with the
bound K <= L, exact recall of every stored text, and the handoff agreeing with the view.
Text-protocol conversations (mini-swe-agent's) still compact their observations to stubs."""

import json

import pytest
from hypothesis import given, settings, strategies as st

from arc_vllm.core.budget import HumanTurnTooLarge
from arc_vllm.core.config import ArcConfig
from arc_vllm.core.context import ArcContext
from arc_vllm.core.handoff import write_handoff
from arc_vllm.core.recall import recall_all
from arc_vllm.core.snapshot import restore, snapshot
from arc_vllm.core.transcript import HUMAN_SIGNATURE, human_words, take_in
from arc_vllm.core.turn import CITED, VERBATIM
from arc_vllm.serving.sessions.session import Session

from tests.helpers.histories import make_text
from tests.helpers.human_turns import how_shown

TOOLS = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object", "properties": {
    "command": {"type": "string"}}}}}]
REMINDER = "<system-reminder>The user's timezone is UTC. Files may have changed.</system-reminder>"


def tool_call(index: int, body: str) -> list[dict]:
    call = {"id": f"toolu_{index}", "type": "function",
            "function": {"name": "bash", "arguments": json.dumps({"command": f"cat f{index}.py"})}}
    return [{"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"toolu_{index}", "content": body}]


def human_text(number: int, seed: int, length: int) -> str:
    """A user's message: a marker that makes it findable, then any text (any Unicode too)."""
    return f"HUMAN-{number}: never touch config/prod.yaml. " + make_text(seed, length)


def check_view(session, view, humans: list[tuple[str, str]]) -> None:
    """K <= L in real tokens; every human turn so far verbatim or by its head, the newest whole.
    Only where the most W may take cannot hold even the short heads of all of them (a short
    head with its stub line is under 100 tokens) are the oldest left out, and only they."""
    context = session.context
    assert view.tokens <= context.limit_tokens
    assert context.counter.count_messages(view.messages, context.tools) == view.tokens
    figures = view.human_turns
    left_out = figures["left_out"]
    if left_out:
        shown_in_w = len(context.humans.in_w(context.state.boundary)) - left_out
        assert shown_in_w >= context.budgets.humans_most // 100, (shown_in_w, context.budgets.humans_most)
    for number, (text, id) in enumerate(humans):
        shown = how_shown(view.messages, text, id)
        if number == len(humans) - 1:
            assert shown == "verbatim", f"the newest user message is not whole: {text[:60]!r}"
        elif number >= left_out:
            assert shown in ("verbatim", "head"), f"user message {number} reduced or lost: {text[:60]!r}"
    assert figures["verbatim"] + figures["shortened"] + left_out == len(humans)


def watch_w_by_size(context) -> list[int]:
    """Check every fit of W as it happens (W sheds the biggest first): a turn it shortens
    from whole is at least as big as every turn of W it leaves whole (the newest apart, and
    those whose head would be no smaller). Returns a list that counts the fits that
    shortened a turn beside one left whole."""
    humans, fits = context.humans, []
    fit = humans.fit

    def checked(turns, boundary, cap, most=None):
        before = dict(humans.forms)
        changed = fit(turns, boundary, cap, most)
        shown = humans.in_w(boundary)[humans.elided:]
        size = {index: humans.entry(index, turns[index], VERBATIM)[1] for index in shown}
        newly = [index for index in shown if index in humans.forms and index not in before]
        whole = [index for index in shown if index not in humans.forms and index != humans.newest
                 and humans.entry(index, turns[index], CITED)[1] < size[index]]
        for index in newly:
            assert all(size[other] <= size[index] for other in whole), (size[index], [size[o] for o in whole])
        fits.append(bool(newly and whole))
        return changed

    humans.fit = checked
    return fits


# A tool loop: tool results of random lengths; the user speaking (after the assistant's text,
# or typed while a tool ran: the text beside the tool result), sometimes with a client reminder
# in the same message; reminders alone; forced compactions and recalls.
lengths = st.one_of(st.integers(0, 400), st.integers(400, 4_000), st.integers(4_000, 20_000))
events = st.lists(st.one_of(
    st.tuples(st.just("tool"), lengths, st.integers(0, 2**20)),
    st.tuples(st.just("human"), st.one_of(st.integers(0, 300), st.integers(300, 3_000), st.integers(3_000, 9_000)),
              st.integers(0, 2**20),
              st.sampled_from(["after-text", "beside-result", "with-reminder"])),
    st.tuples(st.just("reminder")),
    st.tuples(st.just("recall"), st.integers(0, 1000)),
    st.tuples(st.just("compact"))), min_size=6, max_size=40)


@settings(max_examples=60, deadline=None)
@given(history=events, window=st.sampled_from([(4096, 512), (16384, 1024)]))
def test_every_human_turn_stays_verbatim_or_by_its_head_in_every_view(smol, history, window):
    session = Session("sess_human", ArcConfig.for_window(*window), smol, None)
    messages = [{"role": "system", "content": "You are a coding agent."}, {"role": "user", "content": "Fix the bug."}]
    humans, bodies = [], []  # (text, id) of each human turn; every stored text in order
    session.take_in(messages, TOOLS, save=False)
    watch_w_by_size(session.context)
    for index, event in enumerate(history):
        kind = event[0]
        if kind == "tool":
            body = make_text(event[2], event[1])
            messages += tool_call(index, body)
            bodies.append(body)
        elif kind == "human":
            text = human_text(len(humans), event[2], event[1])
            if event[3] == "beside-result":  # vLLM's converter: the tool message, then the user's text
                body = make_text(event[2] + 1, 200)
                messages += tool_call(index, body) + [{"role": "user", "content": text}]
                bodies.append(body)
            elif event[3] == "with-reminder":  # Claude Code's blocks: a reminder, then the words
                messages += [{"role": "assistant", "content": "Done."},
                             {"role": "user", "content": [{"type": "text", "text": REMINDER},
                                                          {"type": "text", "text": text}]}]
                text = f"{REMINDER}\n{text}"
            else:
                messages += [{"role": "assistant", "content": "Done. What next?"}, {"role": "user", "content": text}]
            humans.append((text, None))
            bodies.append(text)
        elif kind == "reminder":  # client context alone: not the human's words
            messages += [{"role": "user", "content": REMINDER}]
            bodies.append(REMINDER)
        elif kind == "recall" and len(session.store):
            session.context.act(f"_recall §{session.store.ids()[event[1] % len(session.store)]}")
            continue
        elif kind == "compact":
            session.context.compact()
            continue
        session.take_in(messages, TOOLS, save=False)
        if kind == "human":
            turn = session.context.turns[-1]
            assert turn.human and session.store.get(turn.obs_id).signature == HUMAN_SIGNATURE
            humans[-1] = (humans[-1][0], turn.obs_id)
        elif kind == "reminder":
            assert not session.context.turns[-1].human
        try:
            view = session.context.render()
        except HumanTurnTooLarge as refused:
            # Only the newest user message, always whole, can be refused (at its request or at a
            # later one, once the turns after it leave it no room): it is a large part of L.
            newest = session.context.turns[session.context.humans.newest]
            assert newest.obs_id == humans[-1][1] and f"(step {newest.step})" in str(refused)
            assert session.context.sizer.text(humans[-1][0]) > session.context.limit_tokens // 3
            # The user writes again: the long one, stored, is shown by its head from now on.
            short = f"HUMAN-{len(humans)}: shorter then."
            messages.append({"role": "user", "content": short})
            session.take_in(messages, TOOLS, save=False)
            humans.append((short, session.context.turns[-1].obs_id))
            bodies.append(short)
            view = session.context.render()
        check_view(session, view, humans)
    # Everything stored exactly, in order (a refused message too: stored, never lost).
    assert session.store.history() == bodies
    for id in session.store.ids():
        assert recall_all(session.context.recall, id) == session.store.get(id).content


def test_a_40_kb_pasted_log_is_whole_while_newest_then_its_head_in_every_later_view(smol):
    """At a 32k window: the paste whole while it is the newest user message, then (W over its
    cap) its head and the stub line in every later view, its whole text recallable exactly;
    the earlier short instruction verbatim throughout."""
    session = Session("sess_paste", ArcConfig.for_window(32768, 1024), smol, None)
    instruction = "IMPORTANT HUMAN INSTRUCTION: never touch the file config/prod.yaml; the retry budget is 7."
    paste = "Here is the failing log:\n" + "".join(
        f"2026-12-03T10:{index // 60 % 60:02d}:{index % 60:02d} worker-{index % 7} GET /api/items/{index} 200\n"
        for index in range(780))
    assert 39_000 < len(paste) < 41_000
    messages = [{"role": "system", "content": "You are a coding agent."}, {"role": "user", "content": "Fix the bug."}]
    messages += tool_call(0, "ok\n" * 50) + [{"role": "assistant", "content": "Read it."},
                                            {"role": "user", "content": instruction}]
    messages += tool_call(1, "ok\n" * 50) + [{"role": "assistant", "content": "Anything else?"},
                                            {"role": "user", "content": paste}]
    session.take_in(messages, TOOLS, save=False)
    ids = [turn.obs_id for turn in session.context.turns if turn.human]
    assert session.context.sizer.text(paste) > 15_000  # more than W's cap: shortened once not newest
    view = session.context.render()
    assert how_shown(view.messages, paste, ids[1]) == "verbatim"
    forms = []
    for index in range(2, 40):
        messages += tool_call(index, f"line {index}: " + "x" * 2_000 + "\n" * 20)
        if index == 3:
            messages += [{"role": "assistant", "content": "Looking."}, {"role": "user", "content": "Go on."}]
        session.take_in(messages, TOOLS, save=False)
        view = session.context.render()
        assert view.tokens <= session.context.limit_tokens
        assert how_shown(view.messages, instruction, ids[0]) == "verbatim"
        forms.append(how_shown(view.messages, paste, ids[1]))
    assert session.context.num_compactions > 0
    assert forms[0] == "verbatim" and "head" in forms and None not in forms
    assert forms[forms.index("head"):] == ["head"] * (len(forms) - forms.index("head"))  # never grows back
    assert recall_all(session.context.recall, ids[1]) == paste


@settings(max_examples=40, deadline=None)
@given(sizes=st.lists(st.one_of(st.integers(1, 400), st.integers(400, 3_000), st.integers(20_000, 40_000)),
                      min_size=2, max_size=10),
       seed=st.integers(0, 2**20), cap=st.integers(100, 8_000))
def test_w_shortens_the_biggest_first_and_no_more_than_it_must(smol, sizes, seed, cap):
    """One fit of W over random human turns, some of them large pastes: the newest is whole;
    every turn shortened is at least as big as every turn left whole; and the last one
    shortened (the smallest) would not have fitted whole beside the others as they are shown."""
    from arc_vllm.core.citation import CitationBook
    from arc_vllm.core.human_turns import HumanTurns
    from arc_vllm.core.store import ObsStore
    from arc_vllm.core.turn import CHAT, MINIMAL, Turn

    config, store = ArcConfig.for_window(32768, 1024), ObsStore()
    humans, turns = HumanTurns(store, CitationBook(store, smol, config), smol, config), []
    for step, length in enumerate(sizes, 1):
        record = store.append("user message", human_text(step, seed + step, length), step=step)
        turns.append(Turn(step, "", "Done.", record.id, style=CHAT, human=True))
        humans.add(len(turns) - 1)
    humans.fit(turns, len(turns), cap)
    assert humans.newest not in humans.forms
    size = {index: humans.entry(index, turns[index], VERBATIM)[1] for index in humans.order}
    shortened = [index for index in humans.order if index in humans.forms]
    whole = [index for index in humans.order[humans.elided:-1] if index not in humans.forms
             and humans.entry(index, turns[index], CITED)[1] < size[index]]
    for index in shortened:
        assert all(size[other] <= size[index] for other in whole)
    if not humans.elided and MINIMAL not in humans.forms.values():
        capped = humans._capped(turns, humans.order, humans.forms, 0)
        assert capped <= cap or not whole
        if shortened:  # the last one shortened (the smallest) was needed
            index = min(shortened, key=lambda index: (size[index], -index))
            assert capped - humans.entry(index, turns[index], CITED)[1] + size[index] > cap


def test_a_pasted_log_gives_way_before_any_instruction(smol):
    """Issue 54's case: six instructions of about 2,600 characters and a 40 KB paste sent
    among them, grown past a 32k window. Over W's cap the paste is shortened to its head; every
    instruction stays whole in every view (W's cap holds them all beside the paste's head)."""
    session = Session("sess_paste_first", ArcConfig.for_window(32768, 1024), smol, None)
    words = "never touch the config file keep retries at seven run tests before each commit".split()
    instructions = [f"INSTRUCTION {number}: " + " ".join(words[(number + count) % len(words)] for count in range(480))
                    for number in range(6)]
    assert all(2_400 < len(text) < 2_800 for text in instructions)
    paste = "Here is the failing log:\n" + "".join(
        f"2026-12-03T10:{index // 60 % 60:02d}:{index % 60:02d} worker-{index % 7} GET /api/items/{index} 200\n"
        for index in range(780))
    messages = [{"role": "system", "content": "You are a coding agent."}, {"role": "user", "content": "Fix the bug."}]
    said = instructions[:3] + [paste] + instructions[3:]
    session.take_in(messages, TOOLS, save=False)
    fits = watch_w_by_size(session.context)
    forms, index = [], 0
    for step in range(60):
        messages += tool_call(step, f"line {step}: " + "x" * 3_000 + "\n" * 20)
        if step % 2 and index < len(said):  # the user speaks at every second step
            messages += [{"role": "assistant", "content": "Done. What next?"}, {"role": "user", "content": said[index]}]
            index += 1
        session.take_in(messages, TOOLS, save=False)
        view = session.context.render()
        assert view.tokens <= session.context.limit_tokens
        ids = [turn.obs_id for turn in session.context.turns if turn.human]
        for text, id in zip(said, ids):
            if text is not paste:
                assert how_shown(view.messages, text, id) == "verbatim", text[:20]
        if len(ids) > 3:
            forms.append(how_shown(view.messages, paste, ids[3]))
    assert "head" in forms and None not in forms and any(fits)
    assert recall_all(session.context.recall, ids[3]) == paste


def test_the_newest_user_message_that_cannot_fit_is_refused_by_name(smol):
    session = Session("sess_big", ArcConfig.for_window(4096, 512), smol, None)
    messages = [{"role": "user", "content": "Fix the bug."}] + tool_call(0, "ok")
    messages += [{"role": "assistant", "content": "Done."}, {"role": "user", "content": "HUMAN: " + "y z " * 5_000}]
    session.take_in(messages, TOOLS, save=False)
    with pytest.raises(HumanTurnTooLarge, match=r"the newest user message \(step 2\) is \d+ tokens"):
        session.context.render()
    # Stored all the same; a shorter next message is served, the long one shown by its head.
    messages += tool_call(1, "ok") + [{"role": "assistant", "content": "Too long?"}, {"role": "user", "content": "Yes."}]
    session.take_in(messages, TOOLS, save=False)
    view = session.context.render()
    long_id = session.context.turns[1].obs_id
    assert how_shown(view.messages, messages[4]["content"], long_id) == "head"
    assert recall_all(session.context.recall, long_id) == messages[4]["content"]


def test_a_text_protocol_conversation_still_cites_its_user_side_observations(smol):
    """mini-swe-agent's form (no tools): the user message after an action is its output, cited
    in S once long; no W."""
    session = Session("sess_text", ArcConfig.for_window(4096, 512), smol, None)
    messages = [{"role": "system", "content": "You are a helpful assistant."}, {"role": "user", "content": "Fix it."}]
    for index in range(12):
        messages += [{"role": "assistant", "content": f"THOUGHT: look\n```mswea_bash_command\ncat f{index}\n```"},
                     {"role": "user", "content": f"<returncode>0</returncode>\n<output>\n{'row ' * 400}{index}\n</output>"}]
    session.take_in(messages, None, save=False)
    view = session.context.render()
    assert not any(turn.human for turn in session.context.turns)
    assert view.compacted and view.components["W"] == 0 and view.human_turns["messages"] == []
    assert "§" in view.messages[2]["content"] and "(_recall §" in view.messages[2]["content"]


def test_client_context_is_not_the_humans_words():
    """Claude Code's reminders and command output, Codex's environment context and AGENTS.md
    instructions: alone in a user message they are context (may be compacted); beside a
    person's words the message is a human turn whose head skips them."""
    native = [{"role": "user", "content": "task"}] + tool_call(0, "ok")
    cases = {
        REMINDER: False,
        f"{REMINDER}\n{REMINDER}": False,
        "<local-command-stdout>files</local-command-stdout>": False,
        "<environment_context>\n  <cwd>/w</cwd>\n</environment_context>": False,
        "# AGENTS.md instructions for /w\n\n<INSTRUCTIONS>\nbe terse\n</INSTRUCTIONS>": False,
        "<bash-input>ls</bash-input>": True,  # the command a person typed
        f"{REMINDER}\nplease also fix the docs": True,
        "keep going": True,
        "   ": False,
    }
    for text, human in cases.items():
        items = take_in(native + [{"role": "user", "content": text}], [], has_prefix=False)
        assert items.steps[-1].human is human, text
    # List content is judged by its parts, as Claude Code sends its blocks.
    items = take_in(native + [{"role": "user", "content": [{"type": "text", "text": REMINDER},
                                                             {"type": "text", "text": "Use tabs."}]}], [], has_prefix=False)
    assert items.steps[-1].human and human_words(items.steps[-1].observation) == "Use tabs."
    # Without native tool calls the same message is a text-protocol observation.
    text = [{"role": "user", "content": "task"}, {"role": "assistant", "content": "ls"}, {"role": "user", "content": "a b"}]
    assert not take_in(text, [], has_prefix=False).steps[-1].human
    assert take_in(text, [], has_prefix=False, native=True).steps[-1].human  # tools offered
    # A system message later in the conversation (Claude Code's reminders) is never the human's.
    assert not take_in(native + [{"role": "system", "content": "keep going"}], [], has_prefix=False).steps[-1].human


def test_a_conversation_that_turns_native_adopts_its_earlier_user_messages(smol):
    session = Session("sess_late", ArcConfig.for_window(4096, 512), smol, None)
    messages = [{"role": "user", "content": "Hello."}, {"role": "assistant", "content": "Hi."},
                {"role": "user", "content": "Remember: the retry budget is 7."}]
    session.take_in(messages, None, save=False)
    assert not session.context.turns[-1].human
    messages += [{"role": "assistant", "content": "Noted."}, {"role": "user", "content": "Now read f.py."}]
    session.take_in(messages, TOOLS, save=False)  # tools offered from now on
    assert [turn.human for turn in session.context.turns] == [True, True]
    for index in range(10):
        messages += tool_call(index, "row\n" * 600)
        session.take_in(messages, TOOLS, save=False)
    view = session.context.render()
    assert view.compacted
    assert how_shown(view.messages, "Remember: the retry budget is 7.", session.context.turns[0].obs_id) == "verbatim"


def test_the_handoff_lists_the_same_human_turns_as_the_view(smol):
    session = Session("sess_handoff", ArcConfig.for_window(8192, 512), smol, None)
    messages = [{"role": "user", "content": "Fix the bug."}]
    texts = []
    for index in range(30):
        messages += tool_call(index, f"out {index}\n" * 300)
        if index % 6 == 2:
            texts.append(f"HUMAN-{index}: " + ("keep the API stable; " * (150 if index % 12 == 2 else 4)))
            messages += [{"role": "assistant", "content": "Done."}, {"role": "user", "content": texts[-1]}]
    session.take_in(messages, TOOLS, save=False)
    view = session.context.render()
    handoff = write_handoff(session.context, budget_tokens=session.config.handoff_budget_tokens)
    ids = [turn.obs_id for turn in session.context.turns if turn.human]
    in_view = [how_shown(view.messages, text, id) for text, id in zip(texts, ids)]
    in_handoff = [how_shown([{"role": "user", "content": handoff.text}], text, id) for text, id in zip(texts, ids)]
    assert None not in in_view and None not in in_handoff  # the same turns, in both
    assert "head" in in_view and in_view[-1] == in_handoff[-1] == "verbatim"
    # Each as the view shows it, or shorter where the handoff's room is smaller than W's cap...
    assert all((ours, theirs) in (("verbatim", "verbatim"), ("head", "head"), ("head", "verbatim"))
               for ours, theirs in zip(in_handoff, in_view))
    assert set(ids) <= handoff.listed
    # ... and with room enough, exactly as the view shows it.
    roomy = write_handoff(session.context, budget_tokens=8000)
    assert [how_shown([{"role": "user", "content": roomy.text}], text, id) for text, id in zip(texts, ids)] == in_view


def test_a_context_with_human_turns_rebuilds_from_its_snapshot(smol, tmp_path):
    from arc_vllm.core.store import ObsStore

    config = ArcConfig.for_window(4096, 512)
    store = ObsStore.open(tmp_path / "store.arc")
    context = ArcContext(config, smol, store=store, prefix=[{"role": "user", "content": "Fix it."}], tools=TOOLS)
    context.native = True
    for index in range(16):
        context.observe(f"bash({index})", f"row {index}\n" * 400)
        if index % 4 == 1:
            context.observe("Done.", f"HUMAN-{index}: " + "be careful " * (900 if index in (5, 9) else 5),
                            style="chat", signature=HUMAN_SIGNATURE, human=True)
        context.render()
    state = json.loads(json.dumps(snapshot(context)))
    assert state["native"] and state["human_forms"]
    before = context.current_view().messages
    store.close()  # one writer per store file: the process that reopens it
    again = restore(config, smol, ObsStore.open(tmp_path / "store.arc"), context.prefix, TOOLS, state)
    assert again.current_view().messages == before
    assert json.loads(json.dumps(snapshot(again))) == state
