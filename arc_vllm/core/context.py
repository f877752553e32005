"""ArcContext: one agent's ARC state, and the routine that keeps its prompt within L.

    context = ArcContext(config, counter, task="...")
    view = context.render()                 # proactive: compacts first if a budget is exceeded
    results = context.act(action)           # ARC commands in the action, served here (or None)
    context.observe(action, observation)    # a normal tool step: archived, then shown
    view = context.on_overflow(error)       # reactive: the engine said the prompt was too long

B is what the task prefix F actually is (``core/budget.py``); M, R, P, Q and W are caps. While
the whole conversation fits in L = context_window - G_max the view is the full conversation and
nothing is cited. Once ARC acts, a request that asks for a longer answer than G_max
(``set_answer_room``) gets views that leave it that room, as far as F allows. A
context given a ``note`` (the server's, whose F is the client's own prefix) shows it right
after F once it has compacted, so the model learns of stubs and commands when they appear
and a conversation that never needs ARC gets exactly the prompt it would have had without. Compaction happens when the view would not fit (proactive, in
``render``), on the engine's refusal (``on_overflow``) and on a forced schedule
(``compact()``, the paper's fixed call indices); all run one routine. Every view is checked
in real tokens of the serving model's chat template, with the ``tools`` it renders, against
L = context_window - max_tokens before it is returned.

A human turn (the user's own words in a conversation with native tool calls,
``core/transcript.py``) is never reduced to an id: in H it is shown whole, or by its head and
stub line when H's cap needs it (never the newest one), and once it leaves H it is shown in W
(``core/human_turns.py``), right after F. W takes its room from S's cap first, then from H's.
The newest human turn is always whole; one that cannot fit beside F and the other parts in
their smallest form is refused (``HumanTurnTooLarge``, a 400 on the server).

An assistant message's thinking is stored apart, under its own id, and the thinking of the tool
loop the model is in (the turns since the newest human turn) stays with its turns in H, in every
form, whole or (beyond T's cap, oldest first, never the newest) by its stub
(``core/thinking.py``); a turn that leaves H names its thought's id in S, and a thought that leaves
the view is listed in the catalog.

Run ``python -m arc_vllm.core.context`` for a demonstration.
"""

from __future__ import annotations

from dataclasses import asdict, replace

from arc_vllm.core.budget import Budgets, HumanTurnTooLarge, PrefixTooLarge
from arc_vllm.core.catalog import Catalog
from arc_vllm.core.citation import CitationBook
from arc_vllm.core.commands import (CatalogNext, CatalogPage, CommandResult, InvalidCommand,
                                    parse_commands)
from arc_vllm.core.compaction import CompactionState, Summarizer
from arc_vllm.core.config import SUMMARY_MINIMUM_TOKENS
from arc_vllm.core import formats
from arc_vllm.core.formats import ARC_NOTE, bare, recalled_block
from arc_vllm.core.human_turns import HumanTurns
from arc_vllm.core.recall import RecallController
from arc_vllm.core.store import ObsStore
from arc_vllm.core.thinking import HIDDEN, Thinking
from arc_vllm.core.tokens import CachedCounter
from arc_vllm.core.transcript import human_words
from arc_vllm.core.turn import CHAT, CITED, MINIMAL, REACT, VERBATIM, Turn, merge_groups, turn_messages
from arc_vllm.core.view import MessageSizer, View, serialize, uncached_tokens



def arc_system(agent_system: str = "") -> str:
    """ARC's system prompt, assembled here only: the agent's own system prompt (who it is, its
    action format; a recorded agent's, a benchmark's), then ARC's note on the context. Replay,
    ``replay --methods`` and ``ArcPolicy`` all build it so, so their figures compare. (On the
    server the client's prefix stays as sent and the note follows it: ``note``.)"""
    return "\n\n".join(part for part in (agent_system, ARC_NOTE) if part)


DEFAULT_SYSTEM = arc_system()  # the system prompt of a context whose client gives none

# A body over this many characters per token of the space it would need is not counted
# (at worst a body that might just have fitted is cited).
MAX_CHARS_PER_TOKEN = 64


class ArcContext:
    def __init__(self, config, counter, *, task: str = "", system: str = DEFAULT_SYSTEM,
                 store: ObsStore | None = None, prefix: list[dict] | None = None,
                 tools: list[dict] | None = None, note: str = ""):
        self.config = config
        self.note = note
        self.counter = counter if isinstance(counter, CachedCounter) else CachedCounter(counter)
        self.store = store if store is not None else ObsStore(
            head_preview_chars=config.head_preview_chars,
            tail_preview_chars=config.tail_preview_chars)
        self.book = CitationBook(self.store, self.counter, config)
        self.catalog = Catalog(self.book, config)
        self.recall = RecallController(self.store, self.book, self.counter, config)
        self.summarizer = Summarizer(self.store, self.book, self.counter, config)
        self.humans = HumanTurns(self.store, self.book, self.counter, config)
        self.thinking = Thinking(self.store, self.counter)
        self.sizer = MessageSizer(self.counter)
        # F: the client's own prefix messages when given, else ARC's system note and the task.
        self.prefix = prefix or [{"role": "system", "content": system},
                                 {"role": "user", "content": task}]
        self.tools = None
        self.budgets: Budgets | None = None
        self.answer_tokens = 0  # the room the current request asks for its answer
        self.set_tools(tools)
        self.turns: list[Turn] = []
        # The conversation has native tool calls: its user messages are the human's (set by
        # its owner, ``serving/sessions/session.py``; ``adopt_human_turns`` when it turns so late).
        self.native = False
        self.state = CompactionState()
        self.step = max((step for step, _ in self.store.occurrences), default=0)
        # A reopened store's observations are not in this context's turns: they are reached
        # through the catalog from the start.
        for id in self.store.ids():
            self.catalog.add(id)
        self._forms: dict[int, int] = {}   # turns in H not shown verbatim -> their form
        # (turn, its form, its thought's form) -> its messages and their tokens
        self._turn_cache: dict[tuple[int, int, int], tuple[list[dict], int]] = {}
        self.num_proactive = 0
        self.num_reactive = 0
        self.num_forced = 0
        self._last_tokens: int | None = None  # the last view's tokens (a refusal names them)
        self._last_view: list[dict] | None = None  # its messages, in this process

    def set_tools(self, tools: list[dict] | None) -> None:
        """The tools the engine renders into the prompt: part of F. Raises ``PrefixTooLarge``
        (a ValueError) when F leaves less than the other parts need."""
        tools = list(tools) if tools else None
        if self.budgets is not None and tools == self.tools:
            return
        prefix_tokens = self.counter.count_messages(self.prefix, tools)
        # The note leads S once ARC has acted ("note\n\nsummary"): part of S's minimum.
        note_tokens = self.sizer.text(self.note + "\n\n") if self.note else 0
        self.budgets = Budgets.for_prefix(self.config, prefix_tokens, note_tokens, self.answer_tokens)
        self.tools = tools
        self._sized_parts()

    def set_answer_room(self, tokens: int) -> None:
        """The room the next request asks to keep for its answer (its ``max_tokens``). Until
        ARC acts nothing changes; once it has, views leave that room, as far as F and the
        parts' minimum allow, and never less than G_max (``Budgets.for_prefix``)."""
        if tokens == self.answer_tokens:
            return
        self.answer_tokens = tokens
        budgets = self.budgets
        self.budgets = Budgets.for_prefix(self.config, budgets.prefix, budgets.note_tokens, tokens)
        self._sized_parts()

    def _sized_parts(self) -> None:
        # A large F gets smaller recall chunks and catalog pages (``core/budget.py``).
        self.recall.set_chunk_tokens(self.budgets.recall_chunk)
        self.catalog.set_per_page(self.budgets.stubs_per_page)

    def fits(self, tools: list[dict] | None) -> bool:
        """Whether F with these tools would still leave the other parts their minimum."""
        try:
            Budgets.for_prefix(self.config, self.counter.count_messages(self.prefix, tools),
                               self.budgets.note_tokens)
        except PrefixTooLarge:
            return False
        return True

    @property
    def prefix_tokens(self) -> int:
        """B: the real size of F (prefix messages and tools)."""
        return self.budgets.prefix

    # -- the agent's side ----------------------------------------------------------------
    def observe(self, action: str, observation, *, thought: str = "",
                returncode: int | None = None, signature: str | None = None,
                style: str = REACT, call=None, group: int | None = None, role: str = "user",
                reasoning: str = "", human: bool = False):
        """Archive a normal tool step's observation (before anything can hide it). ``human``:
        the observation is the user's own message (a chat turn's), shown whole or by its head,
        never as an id."""
        thinking_id = self.thinking.record(reasoning, self.step + 1)  # the model thought, then acted
        record = self.store.append(action if signature is None else signature, observation,
                                   step=self.step + 1, returncode=returncode)
        self.step += 1
        self.turns.append(Turn(self.step, thought, action, record.id, style=style, call=call,
                               group=group, role=role, reasoning=reasoning, human=human,
                               thinking_id=thinking_id))
        if human:
            self.humans.add(len(self.turns) - 1)
        # Count the new turn now, once: every later view and compaction reads the cached
        # count (a 60,000-character body takes ~35 ms to tokenise on this CPU).
        if not self._too_large(len(self.turns) - 1, self.config.input_budget_tokens):
            self._turn(len(self.turns) - 1, VERBATIM)
        return record

    def act(self, action: str, *, thought: str = "", commands=None, style: str = REACT,
            call=None, group: int | None = None, inline: bool = False,
            reasoning: str = "") -> list[CommandResult] | None:
        """Serve the ARC commands in ``action`` (or the parsed ``commands``); None when there
        are none (a normal action). ``inline`` puts recalled text into the command's own
        response (a tool message answers a tool call) instead of the recalled block U.
        ``reasoning``: what the model thought before the command (stored, and shown with it)."""
        commands = parse_commands(action) if commands is None else commands
        if not commands:
            return None
        thinking_id = self.thinking.record(reasoning, self.step + 1)
        self.step += 1
        results = [self._execute(command) for command in commands]
        texts = []
        for result in results:
            if inline and result.key is not None:  # the text itself, here, not under RECALLED
                id, chunk = result.key
                texts.append(formats.recalled_inline(id, chunk, self.recall.num_chunks(id)))
                texts.append(self.recall.materialized.pop(result.key))
            else:
                texts.append(result.text)
        self.turns.append(Turn(self.step, thought, action, note="\n".join(texts), style=style,
                               call=call, group=group, reasoning=reasoning, thinking_id=thinking_id))
        return results

    def _execute(self, command) -> CommandResult:
        if isinstance(command, InvalidCommand):
            return CommandResult(False, f"`{command.text}`: {command.error}")
        if isinstance(command, (CatalogNext, CatalogPage)):
            result = self.catalog.execute(command)
            if result.ok and not self._page():  # no page in the view (yet, or S lists it): the answer shows it
                return CommandResult(True, f"{result.text}\n{self.catalog.render()}")
            return result
        return self.recall.execute(command, self.step)

    # -- the view ------------------------------------------------------------------------
    @property
    def limit_tokens(self) -> int:
        """What the view must fit in now: L at G_max until ARC acts (the client's conversation
        as sent, while it fits), then the request's L (``set_answer_room``)."""
        return self.budgets.total if self.has_acted else self.config.input_budget_tokens

    def render(self) -> View:
        """The bounded view for the next model call (proactive trigger: compacts only when
        the view would not fit)."""
        compacted, before = False, None
        # Until ARC has acted the real count decides (a piece's estimate may count thinking a
        # template drops): nothing is cited while the conversation fits.
        if self.has_acted and (before := self._estimate()) > self.limit_tokens:
            self._compact()
            self.num_proactive += 1
            compacted = True
        view = self._build()
        if view.tokens > self.limit_tokens and not compacted:
            before = view.tokens
            self._compact()
            self.num_proactive += 1
            compacted = True
            view = self._build()
        total = self.limit_tokens
        while view.tokens > total:
            # The pieces are estimates; the whole prompt in real tokens is the arbiter.
            if not self._tighten():
                self._refuse_newest_human(view.tokens)
                raise RuntimeError(f"cannot fit the view in {total} tokens (at {view.tokens})")
            view = self._build()
            compacted = True
        return self._shown(view, compacted, before)

    def _shown(self, view: View, compacted: bool, before: int | None) -> View:
        """``view`` as the one the model gets now; a compaction's figures on it: the tokens it
        freed (from the view it would have been) and those it left the engine to prefill anew
        (from its first token that differs from the last view's on: its cost to the prefix cache)."""
        view.compacted = compacted
        if compacted:
            view.freed_tokens = max(0, (before or view.tokens) - view.tokens)
            if self._last_view is not None:
                view.uncached_tokens = uncached_tokens(self._last_view, view.messages, self.sizer, view.tokens)
        self._last_tokens = view.tokens
        self._last_view = view.messages
        return view

    def on_overflow(self, error: object = None) -> View:
        """Reactive trigger: the engine refused the prompt as too long. Same routine, and the
        next view is smaller than the refused one (a compaction of short observations can
        add stubs and a catalog page, so it is tightened further where it did not shrink)."""
        refused = self._last_tokens
        self._compact()
        self.num_reactive += 1
        view = self.render()
        while refused is not None and view.tokens >= refused and self._tighten():
            view = self._build()
        return self._shown(view, True, refused)

    def _refuse_newest_human(self, view_tokens: int) -> None:
        """Raise ``HumanTurnTooLarge`` when the newest human turn, always whole, is what keeps
        the view from fitting (everything else is in its smallest form by now)."""
        newest = self.humans.newest
        if newest is None:
            return
        body = self.store.get(self.turns[newest].obs_id).content
        tokens = self.sizer.text(body)
        room = (self.limit_tokens - self.budgets.prefix - self.budgets.note_tokens
                - (self.config.minimum_tokens - self.config.minimum_recent_tokens))
        if tokens > room or view_tokens - tokens < self.limit_tokens:
            raise HumanTurnTooLarge(
                f"the newest user message (step {self.turns[newest].step}) is {tokens} tokens; beside the "
                f"task prefix F ({self.budgets.prefix} tokens) and ARC's other parts in their smallest form, "
                f"L = {self.limit_tokens} leaves at most {max(0, room)} for it. ARC keeps the newest user "
                "message whole: shorten it (a long log is better sent as a file a tool reads), or serve "
                "a longer context window")

    def compact(self) -> None:
        """Forced compaction (the paper's fixed call indices)."""
        self._compact()
        self.num_forced += 1

    @property
    def num_compactions(self) -> int:
        return self.state.num_compactions

    # -- the recent turns ----------------------------------------------------------------
    def _turn(self, index: int, form: int) -> tuple[list[dict], int]:
        """A turn's messages in ``form`` and their tokens (cached: a form's text never
        changes, so H stays prefix-stable between compactions)."""
        thinking = self._thinking_form(index, form)
        key = (index, form, thinking)
        cached = self._turn_cache.get(key)
        if cached is None:
            turn = self.turns[index]
            observation = stub = ""
            if turn.obs_id is not None:
                if form == VERBATIM:
                    observation = self.store.get(turn.obs_id).content
                elif turn.human:  # the user's words: their head and stub line, never an id
                    stub = self.humans.body(index, turn, form)
                elif form == CITED:
                    stub = self.book.stub(turn.obs_id)
                else:
                    stub = bare(turn.obs_id)
            messages = turn_messages(turn, form, observation=observation, stub=stub, config=self.config,
                                     thinking=self.thinking.text(turn, thinking))
            cached = (messages, self.sizer.messages(messages))
            self._turn_cache[key] = cached
        return cached

    def _thinking_form(self, index: int, form: int) -> int:
        """How a turn in ``form`` shows its thought: as ``core/thinking.py`` has it, unless a
        client cleared it (``clear_thinking``)."""
        if index < self.state.thinking_from:
            return HIDDEN
        return self.thinking.form(index, form)

    def _forget(self, index: int, keep: int | None = None) -> None:
        """A turn's cached messages (but those of form ``keep``): its form or its thought's changed."""
        for key in [key for key in self._turn_cache if key[0] == index and key[1] != keep]:
            del self._turn_cache[key]

    @property
    def loop_start(self) -> int:
        """The first turn of the tool loop the model is in: the one after the newest human turn."""
        newest = self.humans.newest
        return 0 if newest is None else newest + 1

    def _fit_thinking(self) -> None:
        """At a compaction: the current loop's thoughts in H within T's cap (``core/thinking.py``),
        never more than half of H's."""
        cap = min(self.budgets.thinking, self._caps()[1] // 2)
        for index in self.thinking.fit(self.turns, self.state.boundary, self.loop_start, cap):
            self._forget(index)

    def _list_hidden_thoughts(self) -> None:
        """The thoughts of turns in H that the view no longer shows join the catalog (each
        thought's id is in the view or in the catalog)."""
        for index in range(self.state.boundary, len(self.turns)):
            turn = self.turns[index]
            if turn.thinking_id and self._thinking_form(index, self._forms.get(index, VERBATIM)) == HIDDEN:
                self.catalog.add(turn.thinking_id)

    def _too_large(self, index: int, space: int) -> bool:
        """Whether a turn's body is certainly larger than ``space`` tokens (not counted)."""
        obs_id = self.turns[index].obs_id
        return obs_id is not None and self.store.get(obs_id).chars > MAX_CHARS_PER_TOKEN * space

    def _turn_tokens(self, index: int) -> int:
        form = self._forms.get(index, VERBATIM)
        if form == VERBATIM and self._too_large(index, self.config.input_budget_tokens):
            return self.config.input_budget_tokens + 1
        return self._turn(index, form)[1]

    def _recent_tokens(self) -> int:
        return self.shown_tokens(self.state.boundary)

    def shown_tokens(self, first_turn: int) -> int:
        """The tokens of the turns from ``first_turn`` on as the view shows them in H (those
        moved out of H count nothing here): what a replay counts as new at a step."""
        return sum(self._turn_tokens(index) for index in range(max(first_turn, self.state.boundary), len(self.turns)))

    def _fitting_form(self, index: int) -> int:
        """Verbatim if the turn fits H's cap alone (and no client cleared it), else its
        observation cited, else minimal. The newest human turn is always verbatim."""
        cap = self._caps()[1]
        if index == self.humans.newest:
            return VERBATIM
        if (index not in self.state.cleared and not self._too_large(index, cap)
                and self._turn(index, VERBATIM)[1] <= cap):
            return VERBATIM
        return CITED if self._turn(index, CITED)[1] <= cap else MINIMAL

    def _caps(self) -> tuple[int, int]:
        """S's and H's caps as W stands: W's room comes from S's cap first (down to its
        header), then from H's (down to the newest turn's minimum). Without human turns in W
        they are the budgets' own."""
        budgets = self.budgets
        w = self.humans.text(self.turns, self.state.boundary)[1]
        if not w:
            return budgets.summary, budgets.recent
        from_summary = min(w, max(0, budgets.summary - SUMMARY_MINIMUM_TOKENS))
        return (budgets.summary - from_summary,
                max(self.config.minimum_recent_tokens, budgets.recent - (w - from_summary)))

    def _set_form(self, index: int, form: int) -> None:
        self._forget(index, keep=form)
        if form == VERBATIM:
            self._forms.pop(index, None)
        else:
            self._forms[index] = form

    # -- compaction ----------------------------------------------------------------------
    def _move_boundary(self, boundary: int) -> None:
        """Turns before ``boundary`` join S; their observations join the catalog."""
        for index in range(self.state.boundary, boundary):
            turn = self.turns[index]
            if turn.thinking_id is not None:  # what the model thought, then what it saw
                self.catalog.add(turn.thinking_id)
            if turn.obs_id is not None:
                self.catalog.add(turn.obs_id)
            # A summarised turn never returns to H: drop its messages (they may hold a copy
            # of a large body), so memory stays proportional to the store.
            self._forms.pop(index, None)
            self._forget(index)
        self.state.boundary = max(self.state.boundary, boundary)
        self.thinking.forget_before(self.state.boundary)
        # Human turns that left H join W, which keeps within its cap.
        self.humans.fit(self.turns, self.state.boundary, self.budgets.humans, self.budgets.humans_most)

    def _compact(self) -> None:
        state = self.state
        if self._compact_in_place():
            state.num_compactions += 1
            return
        self._move_boundary(len(self.turns) - self.config.recent_turns)
        self._fit_thinking()  # first: a turn's size in H is with its thought as shown
        for index in range(state.boundary, len(self.turns)):
            self._set_form(index, self._fitting_form(index))
        # Keep at most recent_kept_percent of H's cap, so the next turns append without another
        # compaction: each compaction prefills the kept H anew, so the less it keeps the less it
        # costs and the later the next one comes (docs/replay.md: the frontier, measured). H's
        # cap is read anew each time: a human turn leaving H grows W.
        while state.boundary < len(self.turns) - 1 and (self._recent_tokens() > self._recent_kept_tokens()
                                                         or self._estimate() > self.low_water_tokens):
            self._move_boundary(state.boundary + 1)
        self._list_hidden_thoughts()
        self.summarizer.shrink(self.turns, state, self._caps()[0], self.sizer.text)
        state.num_compactions += 1

    def _recent_kept_tokens(self) -> int:
        """What a compaction keeps of H at most (``recent_kept_percent`` of H's cap)."""
        return self._caps()[1] * self.config.recent_kept_percent // 100

    @property
    def low_water_tokens(self) -> int:
        """What a compaction cuts the view to (``compact_to_percent`` of L): the next comes later."""
        return self.limit_tokens * self.config.compact_to_percent // 100

    def _compact_in_place(self) -> bool:
        """The cheapest compaction, where it is enough: the turns in H too large for H's cap (a
        long new observation, typically) shown cited where they are, nothing else changed, when
        that alone brings the view under the low-water mark. The view then differs from the
        last one only from the first of them on (the engine's prefix cache keeps the rest), and
        no turn leaves H. Whether it was enough (and done)."""
        state = self.state
        if state.boundary == 0 and not self.has_acted and len(self.turns) <= self.config.recent_turns:
            return False  # (a first compaction of a short history: the usual one is as cheap)
        oversize = [index for index in range(state.boundary, len(self.turns))
                    if index not in self._forms and self._fitting_form(index) != VERBATIM]
        if not oversize:
            return False
        saved = sum(self._turn_tokens(index) - self._turn(index, self._fitting_form(index))[1] for index in oversize)
        if self._estimate() - saved > self.low_water_tokens:
            return False
        for index in oversize:
            turn = self.turns[index]
            if turn.thinking_id and index >= self.loop_start and index not in self.thinking.forms:
                self.thinking.forms[index] = self._thinking_form(index, VERBATIM)  # as it was shown
            self._set_form(index, self._fitting_form(index))
        self._list_hidden_thoughts()
        return True

    def _tighten(self) -> bool:
        """One more step towards a smaller view, least useful content first."""
        state = self.state
        if len(self.recall.materialized) > 1:
            self.recall.evict_oldest()
        elif state.boundary < len(self.turns) - 1:
            self._move_boundary(state.boundary + 1)
            self.summarizer.shrink(self.turns, state, self._caps()[0], self.sizer.text)
        elif state.elided < state.boundary:
            state.elide_one()
        elif (index := self._shrinkable_turn()) is not None:
            self._set_form(index, self._forms.get(index, VERBATIM) + 1)
        elif self.recall.materialized:
            self.recall.evict_oldest()
        elif (index := self.thinking.shrink(self.turns, state.boundary, self.loop_start, self._forms)) is not None:
            self._forget(index)  # a thought by its stub, the newest last
        elif not self.humans.shrink(self.turns, state.boundary):  # the user's words give way last
            return False
        self._list_hidden_thoughts()
        return True

    def _shrinkable_turn(self) -> int | None:
        """The oldest turn in H not yet in its smallest form (never the newest human turn)."""
        return next((index for index in range(self.state.boundary, len(self.turns))
                     if self._forms.get(index, VERBATIM) < MINIMAL and index != self.humans.newest), None)

    def _recalled(self) -> tuple[str, int]:
        budget = self.budgets.recall
        while True:
            items = [(self.recall.label(key), body) for key, body in self.recall.materialized.items()]
            text = recalled_block(items)
            tokens = self.sizer.text(text)
            if tokens <= budget or not items:
                return text, tokens
            self.recall.evict_oldest()

    @property
    def has_acted(self) -> bool:
        """Whether ARC has changed this context's view (a compaction, or a handoff the client
        kept in place of its history): from then on the view is ARC's, with its note and the
        catalog; before, it is the conversation as the client sent it."""
        return self.state.num_compactions > 0 or self.state.handed_off or bool(self.state.cleared)

    def hand_off(self) -> None:
        """The conversation holds ARC's handoff (a compacting client kept it in place of its
        history): the view is ARC's from now on (``has_acted``)."""
        self.state.handed_off = True

    def catalog_order(self) -> list[str]:
        """Every stored id as a catalog lists them: the catalog's own entries (observations
        that left the verbatim view, in that order), then the rest in the store's order."""
        return self.catalog.entries + [id for id in self.store.ids() if id not in self.catalog]

    def carry(self, previous: "ArcContext", handed_off: bool) -> None:
        """Follow ``previous`` over the same store (its client rewrote the history): the stubs
        it showed stay as shown (the Cited set), its catalog keeps its order, and with
        ``handed_off`` (the new history holds ARC's handoff) the view is ARC's from the start,
        so the note and the catalog offer every stored observation."""
        self.book.cited |= previous.book.cited
        catalog = Catalog(self.book, self.config)
        catalog.set_per_page(self.catalog.per_page)
        for id in previous.catalog_order():
            catalog.add(id)
        self.catalog = catalog
        self.state.handed_off = handed_off

    # -- a client's context edits (Anthropic's context_management) ----------------------------
    def clear_tool_results(self, keep: int, exclude: frozenset[str] = frozenset(),
                           at_least_tokens: int = 0) -> tuple[int, int]:
        """Clear the results of tool calls older than the newest ``keep`` (but those of tools
        named in ``exclude``) the way ARC clears: each observation is shown as its citation
        stub (recallable exactly), not deleted; only if that frees ``at_least_tokens``. The
        cited form clips the call's arguments too (Anthropic's ``clear_tool_inputs``). Returns
        the tool calls cleared now and the tokens freed."""
        calls = [index for index, turn in enumerate(self.turns) if turn.call is not None and turn.obs_id is not None]
        chosen = [index for index in calls[:max(0, len(calls) - keep)]
                  if index >= self.state.boundary and index not in self.state.cleared
                  and self.turns[index].call.name not in exclude
                  and self._forms.get(index, VERBATIM) == VERBATIM]
        if not chosen:
            return 0, 0
        self._fit_thinking()  # a cleared turn of the current loop keeps its thinking
        saved = {index: self._turn_tokens(index) - self._turn(index, CITED)[1] for index in chosen}
        if sum(saved.values()) < at_least_tokens:
            return 0, 0
        for index in chosen:
            self.state.cleared.append(index)
            self._set_form(index, CITED)
        self._list_hidden_thoughts()
        return len(chosen), max(0, sum(saved.values()))

    def clear_thinking(self, keep_turns: int | None) -> tuple[int, int]:
        """Show no reasoning in assistant turns but the newest ``keep_turns`` that have some
        (None: keep all). Each thought stays stored: its id is listed in the catalog. Returns
        the turns cleared now and the tokens freed."""
        if keep_turns is None:
            return 0, 0
        with_reasoning = [index for index, turn in enumerate(self.turns) if turn.reasoning]
        kept = with_reasoning[len(with_reasoning) - keep_turns:] if keep_turns else []
        start = kept[0] if kept else len(self.turns)
        if start <= self.state.thinking_from:
            return 0, 0
        newly = [index for index in with_reasoning if self.state.thinking_from <= index < start]
        before = sum(self._turn_tokens(index) for index in newly if index >= self.state.boundary)
        self.state.thinking_from = start
        for index in newly:
            self._forget(index)
            if self.turns[index].thinking_id and index < self.state.boundary:  # in H: listed below
                self.catalog.add(self.turns[index].thinking_id)
        self._list_hidden_thoughts()
        after = sum(self._turn_tokens(index) for index in newly if index >= self.state.boundary)
        return len(newly), max(0, before - after)

    def _summary(self) -> tuple[str, int]:
        """S, with the note leading it once ARC has acted and S or a catalog page is shown (a
        compaction in place, citing in H, inserts nothing before H: its stubs say how to recall)."""
        summary, tokens = self.summarizer.summary(self.turns, self.state)
        if self.note and self.has_acted and (summary or len(self.catalog)):
            summary = f"{self.note}\n\n{summary}" if summary else self.note
            tokens = self.sizer.text(summary)
        return summary, tokens

    def _page(self) -> str:
        """G: the catalog's current page, once ARC has acted (before, the view is the client's
        conversation as sent; a context over a store that already holds observations, a
        session whose client rewrote its history say, lists them from its first compaction),
        and unless it is page 1 and S already shows every stub it holds (``_summary_lists_catalog``):
        that page would repeat S, and each compaction would prefill it anew."""
        if not self.has_acted or (self.catalog.current == 1 and self._summary_lists_catalog()):
            return ""
        return self.catalog.render()

    def _summary_lists_catalog(self) -> bool:
        """Whether every catalog entry is the observation of a turn S shows in full form (by its
        stub, or inline): no thought (S names it by id only), no user's words (they are in W),
        nothing collapsed, elided, or carried from an earlier context. (Asked by every estimate:
        once S collapses, the answer is no without a look at the catalog.)"""
        if self.state.collapsed:
            return False
        shown = {turn.obs_id for turn in self.turns[:self.state.boundary]
                 if turn.obs_id is not None and not turn.human}
        return all(id in shown for id in self.catalog.entries)

    def _humans_and_summary(self) -> tuple[tuple[str, int], tuple[str, int]]:
        """W and S, each as text and its estimate. W stands after F, apart from S, so that S's
        collapses never touch the user's words and W's cached KV outlives them (docs/core.md:
        the placement, measured by ``bench/human_turns.py``, which overrides this for the other)."""
        return self.humans.text(self.turns, self.state.boundary), self._summary()

    def _estimate(self) -> int:
        """The view's size from cached piece counts, to skip building one that cannot fit."""
        (_, humans_tokens), (_, summary_tokens) = self._humans_and_summary()
        return (self.budgets.prefix + humans_tokens + summary_tokens
                + self.sizer.text(self._page()) + self._recent_tokens() + self._recalled()[1])

    def snapshot(self, growing: bool = True) -> dict:
        """What besides the store rebuilds this context's view exactly: the turns, the compaction
        state, H's forms, the step and counters, and each part's own state (``Catalog.state``,
        ``CitationBook.state``, ``RecallController.state``). ``core/snapshot.py`` writes it with
        its format's version. (Not ``state()``: ``state`` is the compaction state.) Without
        ``growing``, the parts that only grow (``growing()``) are left out: a store that appends
        them writes only what is new (``serving/sessions/parts.py``); the rest stays bounded by
        the budgets."""
        state = {"state": asdict(self.state), "step": self.step,
                 "forms": [[index, form] for index, form in sorted(self._forms.items())],
                 **self.recall.state(), **self.humans.state(), **self.thinking.state(),
                 **({"native": True} if self.native else {}),
                 "counts": {"proactive": self.num_proactive, "reactive": self.num_reactive,
                            "forced": self.num_forced, "last_tokens": self._last_tokens}}
        if not growing:
            return {**state, "catalog": {"current": self.catalog.current}}
        return {"turns": [turn.state() for turn in self.turns], **state, **self.catalog.state(), **self.book.state()}

    def growing(self) -> dict:
        """The parts of its snapshot that only grow while it lives (the turns, the catalog's order,
        the Cited set), as the live collections: ``snapshot`` writes them as ``turns``,
        ``catalog.entries`` and ``cited``."""
        return {"turns": self.turns, "catalog": self.catalog.entries, "cited": self.book.cited}

    @classmethod
    def from_snapshot(cls, config, counter, store, prefix: list[dict], tools: list[dict] | None,
                      state: dict, note: str = "") -> "ArcContext":
        """A context over ``store`` with ``state`` (``snapshot``) put back: the same view."""
        context = cls(config, counter, store=store, prefix=prefix, tools=tools, note=note)
        context.turns = [Turn.of_state(turn) for turn in state["turns"]]
        context.state = CompactionState(**state["state"])
        context.step = state["step"]
        context._forms = {int(index): form for index, form in state["forms"]}
        context.catalog.restore(state)
        # An observation stored after the snapshot was taken (a crash in between) has no turn:
        # it is reached through the catalog, as every observation of a reopened store is.
        in_turns = {id for turn in context.turns for id in (turn.obs_id, turn.thinking_id) if id}
        for id in store.ids():
            if id not in context.catalog and id not in in_turns:
                context.catalog.add(id)
        context.book.restore(state)
        context.recall.restore(state)
        context.humans.restore(context.turns, state)
        context.thinking.restore(state)
        context.native = state.get("native", False)
        counts = state["counts"]
        context.num_proactive, context.num_reactive, context.num_forced = (
            counts["proactive"], counts["reactive"], counts["forced"])
        context._last_tokens = counts.get("last_tokens")
        return context

    def current_view(self) -> View:
        """The view as it stands, without compacting: what the model saw at the last call
        (every call renders; nothing changes the state between calls). For inspection."""
        return self._build()

    def human_forms(self) -> dict[int, int]:
        """How the view shows each human turn now (absent: verbatim): W's forms and H's."""
        forms = {index: self._forms[index] for index in self.humans.order
                 if index >= self.state.boundary and index in self._forms}
        return {**{index: form for index, form in self.humans.forms.items() if index < self.state.boundary}, **forms}

    def adopt_human_turns(self) -> int:
        """The conversation turned out to have native tool calls (tools offered after its first
        requests): its earlier chat turns whose user message holds a person's words become human
        turns, shown so from now on. Returns how many."""
        adopted = 0
        for index, turn in enumerate(self.turns):
            if (turn.style == CHAT and turn.role == "user" and not turn.human and turn.obs_id is not None
                    and human_words(self.store.get(turn.obs_id).content)):
                self.turns[index] = replace(turn, human=True)
                self._forget(index)
                self.summarizer.forget(index)
                adopted += 1
        if adopted:
            self.humans.restore(self.turns, self.humans.state())
        return adopted

    def _build(self) -> View:
        (humans, _), (summary, _) = self._humans_and_summary()
        page = self._page()
        indices = range(self.state.boundary, len(self.turns))
        pieces = []
        for index in indices:
            form = self._forms.get(index, VERBATIM)
            if form != VERBATIM and self.turns[index].obs_id is not None and not self.turns[index].human:
                self.book.cite(self.turns[index].obs_id)  # shown as a handle from now on
            pieces.append(self._turn(index, form)[0])
        recent = merge_groups([self.turns[index] for index in indices], pieces)
        recalled, recalled_tokens = self._recalled()
        messages = serialize(self.prefix, humans, summary, page, recent, recalled)
        components = {"F": self.budgets.prefix, "W": self.sizer.text(humans) if humans else 0,
                      "S": self.sizer.text(summary), "G": self.sizer.text(page), "H": self._recent_tokens(),
                      "U": recalled_tokens}
        return View(messages, self.counter.count_messages(messages, self.tools),
                    self.limit_tokens, components, step=self.step, tools=self.tools,
                    human_turns=self._human_figures(pieces, indices, messages, humans))

    def _human_figures(self, pieces, indices, messages, humans: str) -> dict:
        """The human turns this view shows whole and shortened (and left out of W), and the
        indices of the messages holding the user's words (W, and H's human turns)."""
        forms = self.human_forms()
        shown = self.humans.order[self.humans.elided:]
        held = {id(piece[-1]) for index, piece in zip(indices, pieces) if self.turns[index].human}
        where = [number for number, message in enumerate(messages) if id(message) in held]
        if humans:
            where.insert(0, len(self.prefix))
        return {"verbatim": sum(1 for index in shown if forms.get(index, VERBATIM) == VERBATIM),
                "shortened": sum(1 for index in shown if forms.get(index, VERBATIM) != VERBATIM),
                "left_out": self.humans.elided, "messages": where}


if __name__ == "__main__":
    from arc_vllm.offline import go_offline

    go_offline()  # a process starts here: tiktoken's files from this project's cache
    from arc_vllm.core.config import ArcConfig
    from arc_vllm.core.tokens import TiktokenCounter

    context = ArcContext(ArcConfig.for_window(4096, 512), TiktokenCounter(),
                         task="Find the needle in secrets.txt")
    for step in range(12):
        context.observe(f"cat file{step}.txt", f"line of file {step}\n" * 120, thought="reading")
    view = context.render()
    for message in view.messages:
        print(f"--- {message['role']}\n{message['content'][:400]}")
    print(view.components, view.tokens, "<=", view.budget_tokens)
