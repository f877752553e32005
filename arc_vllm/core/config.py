"""ArcConfig: the budgets and limits of one ARC context, validated at construction.

The paper's symbols map to fields as follows (all token budgets are in tokens of the
serving model, chat template included):

    L_ctx  context_window            G_max  max_tokens (the least room kept for the answer)
    B      (not a field)             the task prefix F (system prompt + task + tools) as it is
    M      summary_budget_tokens     cap on the deterministic summary S of older turns
    R      recent_budget_tokens      recent suffix H: what compaction keeps verbatim at least
    P      catalog_budget_tokens     cap on one page G of the citation catalog
    Q      recall_budget_tokens      cap on recalled content U
    eta    overhead_tokens           template and framing overhead
    rho    inline_threshold_tokens   observations shorter than this stay verbatim
    r      recalls_per_step          q   recall_chunk_tokens
           answer_room_percent       once ARC acts, a request asking for a longer answer than
                                     G_max gets views that leave it that room, up to this share
                                     of the window (``core/budget.py``)
           handoff_tokens            cap on ARC's handoff, the summary a compacting client keeps
                                     in place of its history (``core/handoff.py``)
           thinking_budget_tokens    cap on the current tool loop's thinking shown whole in H
                                     (``core/thinking.py``)

B is what F actually is; M, R, P and Q are caps, not reservations (``core/budget.py`` turns
them into the caps of one context once F is known, and what a part leaves unused goes to H).
The config only checks that the parts after F can work at all within L =
context_window - max_tokens: ``minimum_tokens`` (the parts in their smallest form: a little
eta, the newest turn, a catalog page of one stub, a recall chunk of up to 128 tokens, the
summary's header) must fit in L.

Run ``python -m arc_vllm.core.config`` to print a default config and its K and L.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields

# The fixed text around one stub on a catalog page and a catalog page header, in tokens.
# Generous on purpose: the view is checked in real tokens afterwards anyway.
CATALOG_HEADER_TOKENS = 48
# A recalled chunk's markers and header beside its q tokens.
RECALL_FRAMING_TOKENS = 32
# The summary's header and its "steps a-b are not listed" line, when everything is elided.
SUMMARY_MINIMUM_TOKENS = 64
# The smallest recall chunk a large task prefix shrinks q to: still a useful read (about
# 500 characters of code or logs), and the number of chunks stays in the hundreds at most.
MINIMUM_RECALL_CHUNK_TOKENS = 128
# The smallest eta: every piece is counted with its own template framing, so eta only covers
# the generation prompt and merged messages; the whole view is checked in real tokens.
MINIMUM_OVERHEAD_TOKENS = 32
# The smallest handoff (``core/handoff.py``): its fixed lines and a little of each part.
MINIMUM_HANDOFF_TOKENS = 256
# The head of a human turn in its smallest form (``core/human_turns.py``): a line of its words.
SHORT_HEAD_TOKENS = 24
# The head a thought shown as a stub keeps (``core/thinking.py``): its first line or two.
THINKING_HEAD_TOKENS = 48


# G_max, one default everywhere (the field's, ``for_window``'s: the server, the CLI, the benchmarks).
DEFAULT_MAX_TOKENS = 512


def option(default: int, help: str):
    """A field a user sets: ``--arc-NAME`` on ``serve``, ``--NAME`` on the CLI's commands, with
    this help (``options``). One table for the flags, their help and their defaults."""
    return field(default=default, metadata={"help": help})


# The budgets ``for_window`` splits from L (their share of it), and those it derives from them.
WINDOW_SHARES = dict(summary_budget_tokens=0.26, recent_budget_tokens=0.30, catalog_budget_tokens=0.10,
                     recall_budget_tokens=0.20, overhead_tokens=0.06, human_budget_tokens=0.20,
                     thinking_budget_tokens=0.15)
WINDOW_DERIVED = (*WINDOW_SHARES, "recall_chunk_tokens", "stub_max_tokens", "handoff_tokens", "human_head_tokens")


@dataclass(frozen=True)
class ArcConfig:
    context_window: int = 16384
    max_tokens: int = option(DEFAULT_MAX_TOKENS, "G_max: the least room ARC keeps free for each answer; a request's "
                                   "own max_tokens is granted as vLLM grants it")
    summary_budget_tokens: int = 4096
    recent_budget_tokens: int = 4096
    catalog_budget_tokens: int = 1536
    recall_budget_tokens: int = 3072
    overhead_tokens: int = 512
    inline_threshold_tokens: int = option(64, "rho: observations shorter than this are never cited")
    recalls_per_step: int = option(2, "r: recalls served per step")
    recall_chunk_tokens: int = option(2048, "q: tokens of one recall chunk")
    recent_turns: int = option(4, "turns kept verbatim after a compaction")
    head_preview_chars: int = 120
    tail_preview_chars: int = 80
    stub_max_tokens: int = 128
    thought_chars: int = 160
    action_chars: int = 200
    recall_budget_chars: int = option(16000, "characters of recalled text kept in the view")
    recall_max_chars: int = option(8000, "characters one recall may return")
    answer_room_percent: int = option(25, "once ARC acts, a request asking for a longer answer than "
                                          "G_max gets views that leave it that room, up to this "
                                          "share of the window")
    handoff_tokens: int = option(4096, "the most tokens of ARC's handoff, the summary a compacting "
                                       "client keeps")
    human_budget_tokens: int = option(3072, "W: the most tokens of the user's own messages shown after the "
                                            "task once they left the recent turns (every one verbatim, "
                                            "the oldest long ones by their head when over it); a cap, "
                                            "taken from the summary's room first")
    human_head_tokens: int = option(256, "the head a shortened user message shows, in tokens (its stub "
                                         "line names the id that returns it whole)")
    compact_to_percent: int = option(70, "the low-water mark: a compaction cuts the view to at most this share of L, "
                                         "so the next one comes that much later (100: only as far as the parts' "
                                         "caps need)")
    recent_kept_percent: int = option(50, "how much of the recent turns' cap a compaction keeps of them (the "
                                          "rest leaves for the summary): the kept turns are prefilled anew "
                                          "after every compaction, so keeping less costs less and leaves "
                                          "room for longer")
    thinking_budget_tokens: int = option(2048, "the most tokens of the current tool loop's thinking shown whole "
                                               "(the newest thought is always whole; older ones of the loop beyond "
                                               "it show their id and first tokens); a cap inside the recent turns'")

    def __post_init__(self) -> None:
        problems = [f"{f.name}={getattr(self, f.name)!r} must be a non-negative int"
                    for f in fields(self)
                    if not isinstance(getattr(self, f.name), int)
                    or isinstance(getattr(self, f.name), bool) or getattr(self, f.name) < 0]
        if problems:
            raise ValueError("invalid ArcConfig: " + "; ".join(problems))
        positive = ("context_window", "recalls_per_step", "recall_chunk_tokens", "recent_turns",
                    "stub_max_tokens", "recall_budget_chars", "recall_max_chars")
        zero = [name for name in positive if getattr(self, name) == 0]
        if zero:
            raise ValueError(f"invalid ArcConfig: {', '.join(zero)} must be > 0")
        if self.input_budget_tokens <= 0:
            raise ValueError(
                f"invalid ArcConfig: max_tokens={self.max_tokens} leaves no input budget in "
                f"context_window={self.context_window}")
        # A chunk must fit in U with its framing; a character is at most 4 tokens, so q >= 4
        # guarantees a chunk boundary can always fall between characters.
        if not 4 <= self.recall_chunk_tokens <= self.recall_budget_tokens - RECALL_FRAMING_TOKENS:
            raise ValueError(
                f"invalid ArcConfig: recall_chunk_tokens (q)={self.recall_chunk_tokens} must be "
                f">= 4 and <= recall_budget_tokens (Q) - {RECALL_FRAMING_TOKENS} = "
                f"{self.recall_budget_tokens - RECALL_FRAMING_TOKENS}")
        if self.stub_max_tokens + CATALOG_HEADER_TOKENS > self.catalog_budget_tokens:
            raise ValueError(
                f"invalid ArcConfig: catalog_budget_tokens (P)={self.catalog_budget_tokens} "
                f"cannot hold one stub of stub_max_tokens={self.stub_max_tokens} plus a "
                f"{CATALOG_HEADER_TOKENS}-token page header")
        if self.recent_budget_tokens < self.minimum_recent_tokens:
            raise ValueError(
                f"invalid ArcConfig: recent_budget_tokens (R)={self.recent_budget_tokens} must "
                f"hold the newest turn in its smallest form: at least "
                f"{self.minimum_recent_tokens} tokens")
        if self.minimum_tokens > self.input_budget_tokens:
            raise ValueError(
                f"invalid ArcConfig: the parts after the task prefix need at least "
                f"{self.minimum_tokens} tokens (eta {self.minimum_overhead_tokens} + newest turn "
                f"{self.minimum_recent_tokens} + catalog page {self.minimum_catalog_tokens} + "
                f"recall chunk {self.minimum_recall_chunk_tokens + RECALL_FRAMING_TOKENS} + summary "
                f"{SUMMARY_MINIMUM_TOKENS}), over L = context_window - max_tokens = "
                f"{self.input_budget_tokens}; lower them or max_tokens")
        if not 10 <= self.compact_to_percent <= 100:
            raise ValueError(f"invalid ArcConfig: compact_to_percent={self.compact_to_percent} must be "
                             "between 10 and 100 (percent of L)")
        if not 10 <= self.recent_kept_percent <= 100:
            raise ValueError(f"invalid ArcConfig: recent_kept_percent={self.recent_kept_percent} must be "
                             "between 10 and 100 (percent of the recent turns' cap)")
        if self.answer_room_percent > 90:
            raise ValueError(f"invalid ArcConfig: answer_room_percent={self.answer_room_percent} "
                             "must be at most 90 (percent of the context window)")
        if self.handoff_tokens < MINIMUM_HANDOFF_TOKENS:
            raise ValueError(f"invalid ArcConfig: handoff_tokens={self.handoff_tokens} must be at "
                             f"least {MINIMUM_HANDOFF_TOKENS}")
        if self.human_head_tokens < SHORT_HEAD_TOKENS:
            raise ValueError(f"invalid ArcConfig: human_head_tokens={self.human_head_tokens} must be at "
                             f"least {SHORT_HEAD_TOKENS}")
        if self.recall_max_chars > self.recall_budget_chars:
            raise ValueError(
                f"invalid ArcConfig: recall_max_chars={self.recall_max_chars} exceeds "
                f"recall_budget_chars={self.recall_budget_chars}")

    @property
    def input_budget_tokens(self) -> int:
        """L: the usable input-token budget."""
        return self.context_window - self.max_tokens

    @property
    def handoff_budget_tokens(self) -> int:
        """The handoff's cap as used: ``handoff_tokens``, at most half of L (a client keeps
        the handoff in its next prompt, beside its own instructions)."""
        return max(MINIMUM_HANDOFF_TOKENS, min(self.handoff_tokens, self.input_budget_tokens // 2))

    @property
    def minimum_recent_tokens(self) -> int:
        """The newest turn in its smallest form always fits in this many tokens."""
        return max(256, self.stub_max_tokens + 64)

    @property
    def minimum_recall_chunk_tokens(self) -> int:
        return min(self.recall_chunk_tokens, MINIMUM_RECALL_CHUNK_TOKENS)

    @property
    def minimum_catalog_tokens(self) -> int:
        """A catalog page of one stub and its header."""
        return min(self.catalog_budget_tokens, self.stub_max_tokens + CATALOG_HEADER_TOKENS + 1)

    @property
    def minimum_overhead_tokens(self) -> int:
        return min(self.overhead_tokens, MINIMUM_OVERHEAD_TOKENS)

    @property
    def minimum_tokens(self) -> int:
        """What the parts after F need at least, each in its smallest form: eta, the newest
        turn, a catalog page of one stub, one recall chunk with its framing, and the summary's
        header (``core/budget.py`` shrinks the parts to this only when F leaves no more)."""
        return (self.minimum_overhead_tokens + self.minimum_recent_tokens
                + self.minimum_catalog_tokens + self.minimum_recall_chunk_tokens
                + RECALL_FRAMING_TOKENS + SUMMARY_MINIMUM_TOKENS)

    @property
    def stubs_per_page(self) -> int:
        """p: stubs on one catalog page, so that a page never exceeds P tokens."""
        return max(1, (self.catalog_budget_tokens - CATALOG_HEADER_TOKENS)
                   // (self.stub_max_tokens + 1))

    @classmethod
    def for_window(cls, context_window: int, max_tokens: int = DEFAULT_MAX_TOKENS, **overrides) -> "ArcConfig":
        """A config whose budgets are split from L in the default proportions."""
        budget = context_window - max_tokens
        if budget < 1024:
            raise ValueError(f"context_window - max_tokens = {budget} is too small for ARC "
                             "(need at least 1024 input tokens)")
        values = {name: int(budget * share) for name, share in WINDOW_SHARES.items()}
        values["recall_chunk_tokens"] = max(4, min(2048, values["recall_budget_tokens"] - 64))
        values["stub_max_tokens"] = min(128, values["catalog_budget_tokens"] - 64)
        values["handoff_tokens"] = max(MINIMUM_HANDOFF_TOKENS, min(4096, budget // 4))
        values["human_head_tokens"] = max(SHORT_HEAD_TOKENS, min(256, values["human_budget_tokens"] // 4))
        values.update(overrides)
        return cls(context_window=context_window, max_tokens=max_tokens, **values)

    @staticmethod
    def options() -> dict[str, str]:
        """The fields a user sets, each with its help and what it is when unset (for a window
        given, as ``for_window`` makes it): the one source of the ``serve`` flags' and the
        CLI's help."""
        example = ArcConfig.for_window(8192, DEFAULT_MAX_TOKENS)
        described = {}
        for spec in fields(ArcConfig):
            if "help" not in spec.metadata:
                continue
            if spec.name in WINDOW_DERIVED:
                unset = f"from the window; {getattr(example, spec.name)} at 8192 tokens"
            else:
                unset = str(spec.default)
            described[spec.name] = f"{spec.metadata['help']} (unset: {unset})"
        return described

    @staticmethod
    def default_of(name: str) -> int:
        """A field's default (a window's own values aside: ``for_window``)."""
        return next(spec.default for spec in fields(ArcConfig) if spec.name == name)

    def to_dict(self) -> dict:
        return asdict(self)


if __name__ == "__main__":
    config = ArcConfig()
    print(config.to_dict())
    print(f"minimum after F={config.minimum_tokens} L={config.input_budget_tokens} "
          f"stubs_per_page={config.stubs_per_page}")
