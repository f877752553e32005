"""ArcContext: one agent's ARC state, and the routine that keeps its prompt within L.

    context = ArcContext(config, counter, task="...")
    view = context.render()                 # proactive: compacts first if a budget is exceeded
    results = context.act(action)           # ARC commands in the action, served here (or None)
    context.observe(action, observation)    # a normal tool step: archived, then shown
    view = context.on_overflow(error)       # reactive: the engine said the prompt was too long

``render`` and ``on_overflow`` run the same compaction routine; ``compact()`` forces one (the
paper's fixed call indices). Every view is checked in real tokens of the serving model's
chat template against L = context_window - max_tokens before it is returned.

Run ``python -m arc_vllm.core.view`` for a demonstration.
"""

from __future__ import annotations

from arc_vllm.core.catalog import Catalog
from arc_vllm.core.citation import CitationBook
from arc_vllm.core.commands import CatalogNext, CatalogPage, InvalidCommand, parse_commands
from arc_vllm.core.compaction import CompactionState, Summarizer, Turn, clip
from arc_vllm.core.recall import CommandResult, RecallController
from arc_vllm.core.store import ObsStore
from arc_vllm.core.tokens import CachedCounter
from arc_vllm.core.view import MessageSizer, View, recalled_block, serialize

DEFAULT_SYSTEM = (
    "You are an agent that solves tasks with tools. ARC manages your context: older tool "
    "observations may be replaced by citation stubs like §1f3a9c0d, and nothing is ever lost. "
    "To read a stored observation exactly, reply with the action `_recall §id` (long ones come "
    "in chunks: `_recall §id 2`); `_recall_meta §id` shows its metadata; `_catalog next` and "
    "`_catalog page <n>` page through every stored observation.")

VERBATIM, CITED, MINIMAL = 0, 1, 2


class ArcContext:
    def __init__(self, config, counter, *, task: str, system: str = DEFAULT_SYSTEM,
                 store: ObsStore | None = None):
        self.config = config
        self.counter = counter if isinstance(counter, CachedCounter) else CachedCounter(counter)
        self.store = store if store is not None else ObsStore(
            head_preview_chars=config.head_preview_chars,
            tail_preview_chars=config.tail_preview_chars)
        self.book = CitationBook(self.store, self.counter, config)
        self.catalog = Catalog(self.book, config)
        self.recall = RecallController(self.store, self.book, self.counter, config)
        self.summarizer = Summarizer(self.store, self.book, self.counter, config)
        self.sizer = MessageSizer(self.counter)
        self.prefix = [{"role": "system", "content": system}, {"role": "user", "content": task}]
        self.prefix_tokens = self.counter.count_messages(self.prefix)
        if self.prefix_tokens > config.prefix_budget_tokens:
            raise ValueError(
                f"the task prefix F (system prompt + task) is {self.prefix_tokens} tokens, over "
                f"prefix_budget_tokens (B) = {config.prefix_budget_tokens}; shorten the task or "
                "raise B")
        self.turns: list[Turn] = []
        self.state = CompactionState()
        self.step = max((step for step, _ in self.store.occurrences), default=0)
        # A reopened store's observations are not in this context's turns: they are reached
        # through the catalog from the start.
        for id in self.store.ids():
            self.catalog.add(id)
        self._turn_forms: dict[int, tuple[int, list[dict], int]] = {}
        self.num_proactive = 0
        self.num_reactive = 0
        self.num_forced = 0

    # -- the agent's side ----------------------------------------------------------------
    def observe(self, action: str, observation, *, thought: str = "",
                returncode: int | None = None, signature: str | None = None):
        """Archive a normal tool step's observation (before anything can hide it)."""
        record = self.store.append(action if signature is None else signature, observation,
                                   step=self.step + 1, returncode=returncode)
        self.step += 1
        self.turns.append(Turn(self.step, thought, action, record.id))
        return record

    def act(self, action: str, *, thought: str = "") -> list[CommandResult] | None:
        """Serve the ARC commands in ``action``; None when it holds none (a normal action)."""
        commands = parse_commands(action)
        if not commands:
            return None
        self.step += 1
        results = [self._execute(command) for command in commands]
        self.turns.append(Turn(self.step, thought, action,
                               note="\n".join(result.text for result in results)))
        return results

    def _execute(self, command) -> CommandResult:
        if isinstance(command, InvalidCommand):
            return CommandResult(False, f"`{command.text}`: {command.error}")
        if isinstance(command, (CatalogNext, CatalogPage)):
            return self.catalog.execute(command)
        return self.recall.execute(command, self.step)

    # -- the view ------------------------------------------------------------------------
    def render(self) -> View:
        """The bounded view for the next model call (proactive trigger)."""
        compacted = False
        if self._recent_tokens(self.state.boundary) > self.config.recent_budget_tokens:
            self._compact()
            self.num_proactive += 1
            compacted = True
        view = self._build()
        while view.tokens > self.config.input_budget_tokens:
            # The pieces are estimates; the whole prompt in real tokens is the arbiter.
            if not self._tighten():
                raise RuntimeError(f"cannot fit the view in {self.config.input_budget_tokens} "
                                   f"tokens (at {view.tokens}); the config is too tight")
            view = self._build()
            compacted = True
        view.compacted = compacted
        return view

    def on_overflow(self, error: object = None) -> View:
        """Reactive trigger: the engine refused the prompt as too long. Same routine."""
        self._compact()
        self.num_reactive += 1
        view = self.render()
        view.compacted = True
        return view

    def compact(self) -> None:
        """Forced compaction (the paper's fixed call indices)."""
        self._compact()
        self.num_forced += 1

    @property
    def num_compactions(self) -> int:
        return self.state.num_compactions

    # -- compaction ----------------------------------------------------------------------
    def _turn_form(self, index: int) -> tuple[int, list[dict], int]:
        """A recent turn's messages: verbatim if it fits R alone, else its observation cited,
        else a minimal form. Decided once per turn, so H stays prefix-stable."""
        cached = self._turn_forms.get(index)
        if cached is None:
            turn = self.turns[index]
            budget = self.config.recent_budget_tokens
            forms = [(VERBATIM, turn), (CITED, Turn(turn.step, clip(turn.thought, self.config.thought_chars),
                                                    clip(turn.action, self.config.action_chars),
                                                    turn.obs_id, turn.note and clip(turn.note, 400)))]
            for form, shown in forms:
                if form == VERBATIM and turn.obs_id is not None and \
                        self.store.get(turn.obs_id).chars > 64 * budget:
                    # Would need over 64 characters a token to fit: skip counting a huge
                    # body (at worst this cites a body that might just have fitted).
                    continue
                messages = self.summarizer.turn_messages(shown, cite=form != VERBATIM
                                                         and turn.obs_id is not None)
                tokens = sum(self.sizer(message) for message in messages)
                if tokens <= budget:
                    cached = (form, messages, tokens)
                    break
            else:
                # At most ~200 tokens whatever the text; ArcConfig keeps R above that.
                messages = [{"role": "assistant", "content": f"Action: {clip(turn.action, 40)}"},
                            {"role": "user", "content": f"[step {turn.step}] "
                             + (f"§{turn.obs_id} (_recall §{turn.obs_id})" if turn.obs_id
                                else clip(turn.note or "", 40))}]
                cached = (MINIMAL, messages, sum(self.sizer(message) for message in messages))
            self._turn_forms[index] = cached
        return cached

    def _recent_tokens(self, boundary: int) -> int:
        return sum(self._turn_form(index)[2] for index in range(boundary, len(self.turns)))

    def _move_boundary(self, boundary: int) -> None:
        """Turns before ``boundary`` join S; their observations join the catalog."""
        for index in range(self.state.boundary, boundary):
            turn = self.turns[index]
            if turn.obs_id is not None:
                self.catalog.add(turn.obs_id)
            # A summarised turn never returns to H: drop its messages (they may hold a copy
            # of a large body), so memory stays proportional to the store.
            self._turn_forms.pop(index, None)
        self.state.boundary = max(self.state.boundary, boundary)

    def _compact(self) -> None:
        state = self.state
        self._move_boundary(len(self.turns) - self.config.recent_turns)
        # Leave a quarter of R free, so the next turns append without another compaction
        # (each compaction costs the engine the cached prefix after S).
        target = self.config.recent_budget_tokens * 3 // 4
        while (state.boundary < len(self.turns) - 1
               and self._recent_tokens(state.boundary) > target):
            self._move_boundary(state.boundary + 1)
        self.summarizer.shrink(self.turns, state, self.config.summary_budget_tokens, self.sizer.text)
        state.num_compactions += 1

    def _tighten(self) -> bool:
        state = self.state
        if self.recall.materialized:
            self.recall.evict_oldest()
        elif state.boundary < len(self.turns) - 1:
            self._move_boundary(state.boundary + 1)
            self.summarizer.shrink(self.turns, state, self.config.summary_budget_tokens,
                                   self.sizer.text)
        elif state.elided < state.boundary:
            state.elided += 1
            state.collapsed = max(state.collapsed, state.elided)
        else:
            return False
        return True

    def _recalled(self) -> tuple[str, int]:
        budget = self.config.recall_budget_tokens
        while True:
            items = [(self.recall.label(key), body) for key, body in self.recall.materialized.items()]
            text = recalled_block(items)
            tokens = self.sizer.text(text)
            if tokens <= budget or not items:
                return text, tokens
            self.recall.evict_oldest()

    def _build(self) -> View:
        summary, _ = self.summarizer.summary(self.turns, self.state)
        page = self.catalog.render()
        recent = [message for index in range(self.state.boundary, len(self.turns))
                  for message in self._turn_form(index)[1]]
        recalled, recalled_tokens = self._recalled()
        messages = serialize(self.prefix, summary, page, recent, recalled)
        components = {"F": self.prefix_tokens, "S": self.sizer.text(summary),
                      "G": self.sizer.text(page), "H": self._recent_tokens(self.state.boundary),
                      "U": recalled_tokens}
        return View(messages, self.counter.count_messages(messages),
                    self.config.input_budget_tokens, components, step=self.step)
