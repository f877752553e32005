"""Deterministic compaction: which turns are summarised, and how each one is written.

No model call. Turns before ``boundary`` form the summary S; the rest are the recent suffix
H, kept verbatim where they fit. In S, older thoughts are truncated, short observations
(< rho tokens) stay inline, long ones become their citation stub; a human turn's entry says
where the user's words are (W, ``core/human_turns.py``), never an id; a step with thinking names
its stored thought's id (``core/thinking.py``). If S still exceeds M, the
oldest entries collapse to their bare ``§id``, and if that is not enough the oldest are left
out of S altogether (their stubs stay in the catalog, so nothing becomes unreachable).
Both steps overshoot to half of M so that S, and with it the engine's cached prefix, changes
rarely (each shrink rewrites S from its first collapsed entry on; between shrinks S only grows
at its end), and the line that stands for the entries left out is one text whatever their
number, so leaving out more does not change S's start. An entry's text depends only on the turn and its form, so it is rendered once.

Run ``python -m arc_vllm.core.compaction`` to print a summary of a small synthetic history.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from arc_vllm.core import formats
from arc_vllm.core.formats import bare
from arc_vllm.core.turn import MINIMAL_ACTION_CHARS, Turn, clip

FULL, BARE = "full", "bare"


@dataclass
class CompactionState:
    boundary: int = 0   # turns[:boundary] are in S
    collapsed: int = 0  # turns[elided:collapsed] are written in bare form
    elided: int = 0     # turns[:elided] are left out of S (still in the catalog)
    num_compactions: int = 0
    # The context follows ARC's handoff (a client compacted and kept it): ARC has acted.
    handed_off: bool = False
    # A client's context edits (Anthropic's clear_tool_uses / clear_thinking, ``ArcContext.clear_*``):
    cleared: list[int] = field(default_factory=list)  # turns whose observation H shows as its stub
    thinking_from: int = 0                             # turns before it show no reasoning

    def elide_one(self) -> None:
        """Leave the oldest listed entry out of S (an elided entry is never shown collapsed)."""
        self.elided += 1
        self.collapsed = max(self.collapsed, self.elided)


class Summarizer:
    """Writes S's entries (a context's S, and the handoff's "what was done"); caches each
    entry's text and token count."""

    def __init__(self, store, book, counter, config):
        self.store = store
        self.book = book
        self.counter = counter
        self.config = config
        self._entries: dict[tuple[int, str], tuple[str, int]] = {}

    def is_inline(self, obs_id: str) -> bool:
        """Shorter than rho tokens. A long body is judged by a prefix: a text has at least as
        many tokens as any prefix of it, less one at the cut, so counting 16 characters per
        token of rho is enough to decide, without tokenising a 60,000-character body."""
        rho = self.config.inline_threshold_tokens
        body = self.store.get(obs_id).content
        if len(body) > 16 * rho:
            return self.counter.count(body[:16 * rho]) - 1 < rho and \
                self.store.tokens(obs_id, self.counter) < rho
        return self.store.tokens(obs_id, self.counter) < rho

    def entry(self, index: int, turn: Turn, form: str) -> tuple[str, int]:
        key = (index, form)
        cached = self._entries.get(key)
        if cached is None:
            text = self._write_entry(turn, form)
            cached = (text, self.counter.count(text) + 1)  # + the joining newline
            self._entries[key] = cached
        return cached

    def _write_entry(self, turn: Turn, form: str) -> str:
        thinking = turn.thinking_id
        if thinking:
            self.book.cite(thinking)  # its id is shown: fixed from now on
        if turn.human:  # the user's words are in W, whole or by their head: never an id here
            return formats.summary_human(turn.step, clip(turn.action, self.config.action_chars if form == FULL
                                                         else MINIMAL_ACTION_CHARS), thinking)
        if form == BARE:
            if turn.obs_id is None:
                return formats.summary_bare(turn.step, clip(turn.action, MINIMAL_ACTION_CHARS), thinking)
            self.book.cite(turn.obs_id)  # shown as a handle: its stub text is fixed from now on
            return formats.summary_bare(turn.step, bare(turn.obs_id), thinking)
        thought = clip(turn.thought, self.config.thought_chars)
        action = clip(turn.action, self.config.action_chars)
        if turn.obs_id is None:
            result = clip(turn.note or "", self.config.thought_chars)
        elif self.is_inline(turn.obs_id):
            record = self.store.get(turn.obs_id)
            result = formats.inline_observation(turn.obs_id, record.returncode, record.content)
        else:
            return formats.summary_entry(turn.step, thought, action, self.book.cite(turn.obs_id),
                                         indent=True, thinking=thinking)
        return formats.summary_entry(turn.step, thought, action, result, thinking=thinking)

    def forget(self, index: int) -> None:
        """One turn's entries (it became a human turn: ``ArcContext.adopt_human_turns``)."""
        for form in (FULL, BARE):
            self._entries.pop((index, form), None)

    def forget_before(self, index: int) -> None:
        """Entries of elided turns are never shown again."""
        for key in [key for key in self._entries if key[0] < index]:
            del self._entries[key]

    def summary(self, turns: list[Turn], state: CompactionState) -> tuple[str, int]:
        """S as text and its token estimate ('' when nothing is summarised)."""
        if state.boundary == 0:
            return "", 0
        # A constant header: a compaction that only appends entries leaves the summary's
        # existing text, and so the engine's cached prefix through it, unchanged.
        parts = [formats.SUMMARY_HEADER]
        if state.elided:
            parts.append(formats.SUMMARY_ELIDED)
        tokens = sum(self.counter.count(part) + 1 for part in parts)
        for index in range(state.elided, state.boundary):
            form = BARE if index < state.collapsed else FULL
            text, cost = self.entry(index, turns[index], form)
            parts.append(text)
            tokens += cost
        return "\n".join(parts), tokens

    def shrink(self, turns: list[Turn], state: CompactionState, budget: int, sizer,
               forget: bool = True) -> None:
        """Collapse, then elide, the oldest entries until S fits ``budget`` tokens. ``forget``:
        drop the cached entries of elided turns (a context's own S never shows them again;
        the handoff's summary is written over a state of its own and leaves them)."""
        target = budget // 2
        text, estimate = self.summary(turns, state)
        # The estimate (sum of cached piece counts) is close; the exact count of S costs a
        # full tokenisation, so it is taken only when the estimate cannot decide.
        if estimate <= budget - budget // 16 and sizer(text) <= budget:
            return
        while state.collapsed < state.boundary and estimate > target:
            index = state.collapsed
            if index >= state.elided:
                estimate += (self.entry(index, turns[index], BARE)[1]
                             - self.entry(index, turns[index], FULL)[1])
            state.collapsed += 1
        while state.elided < state.boundary and estimate > target:
            index = state.elided
            estimate -= self.entry(index, turns[index], BARE if index < state.collapsed else FULL)[1]
            state.elide_one()
        # The real count is the arbiter.
        text, _ = self.summary(turns, state)
        while sizer(text) > budget and state.elided < state.boundary:
            state.elide_one()
            text, _ = self.summary(turns, state)
        if forget:
            self.forget_before(state.elided)


if __name__ == "__main__":
    from arc_vllm.offline import go_offline

    go_offline()  # a process starts here: tiktoken's files from this project's cache
    from arc_vllm.core.citation import CitationBook
    from arc_vllm.core.config import ArcConfig
    from arc_vllm.core.store import ObsStore
    from arc_vllm.core.tokens import TiktokenCounter

    config, counter, store = ArcConfig(), TiktokenCounter(), ObsStore()
    book = CitationBook(store, counter, config)
    turns = []
    for step in range(1, 6):
        body = "ok" if step % 2 else f"log line {step}\n" * 200
        record = store.append(f"run {step}", body, step=step, returncode=0)
        turns.append(Turn(step, f"I will run {step} and look at its output carefully", f"run {step}",
                          record.id))
    summarizer = Summarizer(store, book, counter, config)
    print(summarizer.summary(turns, CompactionState(boundary=4, collapsed=1))[0])
