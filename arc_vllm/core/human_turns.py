"""W: the human's own messages, in every view. A human turn is not an observation.

In a conversation with native tool calls a user message without a tool result is the human
speaking (``core/transcript.py`` decides which, and why). It is stored like every observation,
so its id returns it exactly, but no view reduces it to an id:

- among the recent turns H it is shown in its place, verbatim (``ArcContext``);
- once a compaction moves it out of H, it is shown in W: one user message right after the task
  prefix F that holds every such turn in conversation order, verbatim, each under its step
  (S keeps a line at that step saying where the words are);
- over W's cap (``Budgets.humans``, from ``human_budget_tokens``) the biggest are shown by their
  head first (the first ``human_head_tokens`` tokens of the human's own words, client context
  left out: the instruction usually comes first) and a stub line naming the id that returns the
  whole text, the oldest first among equals, so a pasted log gives way before an instruction
  does; still over it, biggest first again, by a short head (``SHORT_HEAD_TOKENS``). A turn's
  form never grows back, so W's text changes only where a turn joins or shrinks;
- the newest human turn is always whole, wherever it is, and outside W's cap. Only when even
  the short heads of the others do not fit the most W may take (S's and H's room beyond their
  minimum, ``Budgets.humans_most``) are the oldest left out, while they do not, with a line
  naming their steps (the catalog lists them): about twenty long user messages in a 4k window
  with a 900-token task prefix (``bench/human_turns.py``), far more at 16k and above.

The forms are the turns' own (``core/turn.py``): VERBATIM, CITED (the head) and MINIMAL (the
short head), and the same bodies show a human turn in H when H's cap needs a smaller one. The
handoff (``core/handoff.py``) lists the same turns with the same bodies (``listing``).

    humans = HumanTurns(store, book, counter, config)
    humans.add(index)                        # a human turn was observed at turns[index]
    humans.fit(turns, boundary, cap)         # W within ``cap`` tokens, the biggest shortened first
    text, tokens = humans.text(turns, boundary)

Run ``python -m arc_vllm.core.human_turns`` for an example.
"""

from __future__ import annotations

import bisect

from arc_vllm.core import formats
from arc_vllm.core.config import SHORT_HEAD_TOKENS
from arc_vllm.core.recall import chunk_bounds
from arc_vllm.core.transcript import human_words
from arc_vllm.core.turn import CITED, MINIMAL, VERBATIM

JOIN_TOKENS = 2  # the blank line between two entries


class HumanTurns:
    """The human turns of one context: which they are, how W shows each, and W's text."""

    def __init__(self, store, book, counter, config):
        self.store = store
        self.book = book
        self.counter = counter
        self.config = config
        self.order: list[int] = []        # indices of the human turns in the context's turns
        self.forms: dict[int, int] = {}   # index -> CITED or MINIMAL as W shows it (absent: VERBATIM)
        self.elided = 0                   # W leaves out the oldest this many (no room even for heads)
        self._bodies: dict[tuple[int, int], str] = {}
        self._entries: dict[tuple[int, int], tuple[str, int]] = {}
        # W's text as last built, keyed by what decides it: read on every render and estimate.
        self._version = 0
        self._built: tuple[tuple, tuple[str, int]] | None = None

    def add(self, index: int) -> None:
        self.order.append(index)

    @property
    def newest(self) -> int | None:
        return self.order[-1] if self.order else None

    def in_w(self, boundary: int) -> list[int]:
        """The human turns that have left H (before ``boundary``), oldest first."""
        return self.order[:bisect.bisect_left(self.order, boundary)]

    def body(self, index: int, turn, form: int) -> str:
        """The user's message as ``form`` shows it: whole, or its head and the stub line."""
        record = self.store.get(turn.obs_id)
        if form == VERBATIM:
            return record.content
        key = (index, form)
        body = self._bodies.get(key)
        if body is None:
            words = human_words(record.content)
            limit = self.config.human_head_tokens if form == CITED else SHORT_HEAD_TOKENS
            # A head of ``limit`` tokens lies within its first 32 characters per token; only
            # that much of a long paste is tokenised.
            start = words[:32 * limit]
            _, end = chunk_bounds(start, self.counter.token_starts(start), limit)[0]
            self.book.cite(turn.obs_id)  # its id is shown: fixed from now on (the Cited set)
            body = formats.human_head(words[:end], turn.obs_id, record.chars)
            self._bodies[key] = body
        return body

    def entry(self, index: int, turn, form: int) -> tuple[str, int]:
        """W's entry for one turn and its tokens (with the blank line before it)."""
        key = (index, form)
        cached = self._entries.get(key)
        if cached is None:
            text = formats.human_entry(turn.step, self.body(index, turn, form))
            cached = (text, self.counter.count(text) + JOIN_TOKENS)
            self._entries[key] = cached
        return cached

    def text(self, turns, boundary: int) -> tuple[str, int]:
        """W as text, and its token estimate ('' when no human turn has left H)."""
        shown = self.in_w(boundary)
        key = (len(shown), self.elided, self._version)
        if self._built is None or self._built[0] != key:
            self._built = (key, self._text(turns, shown, self.forms, self.elided))
        return self._built[1]

    def _text(self, turns, shown: list[int], forms: dict, elided: int) -> tuple[str, int]:
        if not shown:
            return "", 0
        parts = [formats.HUMAN_TURNS_HEADER]
        if elided:
            parts.append(formats.humans_elided(turns[shown[0]].step, turns[shown[elided - 1]].step))
        tokens = sum(self.counter.count(part) + JOIN_TOKENS for part in parts)
        for index in shown[elided:]:
            text, cost = self.entry(index, turns[index], forms.get(index, VERBATIM))
            parts.append(text)
            tokens += cost
        return "\n\n".join(parts), tokens

    def fit(self, turns, boundary: int, cap: int, most: int | None = None) -> bool:
        """Shorten W until its turns but the newest fit ``cap`` tokens: the biggest turns to
        their head (the oldest first among equals), then to their short head; then (only then, and only beyond ``most``, the
        most W may take: S and H at their minimum) the oldest left out. The newest human turn
        is whole and outside the cap (as the newest turn is in H): a long paste that is the
        newest shortens nothing else. Whether anything changed."""
        shown = self.in_w(boundary)
        elided, changed = self._fit(turns, shown, self.forms, 0, cap, most=cap if most is None else most)
        changed |= elided != self.elided
        self.elided = elided
        self._version += changed
        return changed

    def shrink(self, turns, boundary: int) -> bool:
        """One turn of W shown smaller than now, the biggest that can be (the view's last resort,
        ``ArcContext._tighten``); never one left out: where nothing is left to shorten, the
        newest user message is what does not fit. Whether one was."""
        shown = self.in_w(boundary)
        capped = self._capped(turns, shown, self.forms, self.elided)
        _, changed = self._fit(turns, shown, self.forms, self.elided, capped - 1, leave_out=False)
        self._version += changed
        return changed

    def _capped(self, turns, shown: list[int], forms: dict, elided: int) -> int:
        """W's tokens less the newest human turn's entry, when W holds it."""
        tokens = self._text(turns, shown, forms, elided)[1]
        if shown and shown[-1] == self.newest:
            tokens -= self.entry(shown[-1], turns[shown[-1]], forms.get(shown[-1], VERBATIM))[1]
        return tokens

    def _fit(self, turns, shown: list[int], forms: dict, elided: int, cap: int,
             leave_out: bool = True, most: int | None = None) -> tuple[int, bool]:
        tokens = self._capped(turns, shown, forms, elided)
        changed = False
        newest = self.newest
        # Biggest first (a pasted log before an instruction), the oldest first among equals.
        by_size = sorted(shown[elided:], key=lambda index: -self.entry(index, turns[index], VERBATIM)[1])
        for form in (CITED, MINIMAL):
            for index in by_size:
                if tokens <= cap:
                    return elided, changed
                now = forms.get(index, VERBATIM)
                if index == newest or now >= form:
                    continue
                smaller = self.entry(index, turns[index], form)[1] - self.entry(index, turns[index], now)[1]
                if smaller < 0:  # a short message is not made longer by a head and a stub line
                    forms[index] = form
                    tokens += smaller
                    changed = True
        keep = 1 if shown and shown[-1] == newest else 0  # the newest is never left out
        most = cap if most is None else most
        while leave_out and tokens > most and elided < len(shown) - keep:
            elided += 1
            tokens = self._capped(turns, shown, forms, elided)
            changed = True
        return elided, changed

    def listing(self, turns, forms: dict[int, int], cap: int) -> tuple[str, list[int]]:
        """Every human turn in order, each in its form in the view (``forms``: every turn's, H's
        too) or smaller where ``cap`` tokens need it (the handoff's list: the same turns as the
        view, the same bodies); and the turns it shows. ``forms`` is not changed."""
        forms = dict(forms)
        elided, _ = self._fit(turns, self.order, forms, 0, cap)
        return self._text(turns, self.order, forms, elided)[0], self.order[elided:]

    def state(self) -> dict:
        """Its part of a context's snapshot; nothing where no turn was shortened (a snapshot of a
        conversation without human turns reads as before). The order is the turns'."""
        state = {}
        if self.forms:
            state["human_forms"] = [[index, form] for index, form in sorted(self.forms.items())]
        if self.elided:
            state["human_elided"] = self.elided
        return state

    def restore(self, turns, state: dict) -> None:
        self._version += 1
        self.order = [index for index, turn in enumerate(turns) if turn.human]
        self.forms = {int(index): form for index, form in state.get("human_forms", [])}
        self.elided = state.get("human_elided", 0)


if __name__ == "__main__":
    from arc_vllm.offline import go_offline

    go_offline()  # a process starts here: tiktoken's files from this project's cache
    from arc_vllm.core.citation import CitationBook
    from arc_vllm.core.config import ArcConfig
    from arc_vllm.core.store import ObsStore
    from arc_vllm.core.tokens import TiktokenCounter
    from arc_vllm.core.turn import CHAT, Turn

    config, counter, store = ArcConfig.for_window(4096), TiktokenCounter(), ObsStore()
    humans = HumanTurns(store, CitationBook(store, counter, config), counter, config)
    turns = []
    for step, text in enumerate(["Never touch config/prod.yaml; the retry budget is 7.",
                                 "Here is the log:\n" + "GET /health 200\n" * 400, "Now fix the retry."], 1):
        record = store.append("user message", text, step=step)
        turns.append(Turn(step, "", "Done.", record.id, style=CHAT, human=True))
        humans.add(len(turns) - 1)
    humans.fit(turns, len(turns), cap=300)
    print(humans.text(turns, len(turns))[0])
