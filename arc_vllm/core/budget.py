"""The caps of one context, once its task prefix F is known: B is what F is.

    L    = context_window - answer room, the room kept free for the answer: at least G_max
           (``max_tokens``), more when the request asks for more (``answer_tokens``), up to
           ``answer_room_percent`` of the window and as far as F and the other parts' minimum
           allow
    free = L - F - eta
    U  <= recall   = min(Q, free - newest turn's minimum - P - S's minimum)  (>= one chunk)
    S  <= summary  = min(M, what is left beyond R)                            (>= its header)
    H  <= recent   = free - P - recall - summary                              (>= R when F allows)
    W  <= humans   = min(W, humans_most); humans_most = what S and H hold beyond their minimum
    T  <= thinking = min(T, recent / 2): the current loop's thinking shown whole, inside H

These are caps, not reservations: the view is compacted only when the whole of it would
exceed L, so a part that uses less leaves the room to the recent turns. W, the user's own
messages that left H (``core/human_turns.py``), is shown at its real size, at most ``humans``
(beyond it the oldest long ones are shortened to their head; only beyond ``humans_most``, the
most it can take, is any left out), and takes its room from S's cap first, then H's
(``ArcContext``): a conversation without human turns gets exactly the caps it had before. T, the
thinking of the tool loop the model is in (``core/thinking.py``), is part of H: its cap decides
how much of the loop's thinking H shows whole, never more than half of H. ``recent`` is what
compaction keeps H under (at most ``recent_kept_percent`` of it) and the size above which one turn is
shown cited rather than verbatim once a compaction was needed. A context that shows a note
(the server's, leading S once ARC has acted) counts it as part of S's minimum.

A large F shrinks the parts to the room that is left before anything is refused, in this
order: the recall chunk q (down to ``MINIMUM_RECALL_CHUNK_TOKENS``), the catalog page P
(down to one stub and its header), then eta (down to ``MINIMUM_OVERHEAD_TOKENS``). The
context then chunks recalls and pages its catalog at the sizes chosen here
(``recall_chunk``, ``stubs_per_page``). A prefix is refused only when F plus the parts in
their smallest form (``ArcConfig.minimum_tokens`` and the note) exceed L.

Run ``python -m arc_vllm.core.budget F`` to print the caps at a 4,096-token window for a
prefix of F tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

from arc_vllm.core.config import (CATALOG_HEADER_TOKENS, RECALL_FRAMING_TOKENS,
                                  SUMMARY_MINIMUM_TOKENS, ArcConfig)


class PrefixTooLarge(ValueError):
    """The task prefix leaves less than the minimum the other parts need."""


class HumanTurnTooLarge(ValueError):
    """The newest user message, always shown whole, cannot fit beside F and the other parts."""


@dataclass(frozen=True)
class Budgets:
    prefix: int          # F, in tokens (B)
    summary: int         # cap on S (without the note)
    recent: int          # cap on H after a compaction
    catalog: int         # cap on G (P)
    recall: int          # cap on U
    total: int           # L
    recall_chunk: int    # q for this context: the tokens of one recall chunk
    stubs_per_page: int  # p for this context: the stubs on one catalog page
    overhead: int        # eta for this context
    note_tokens: int     # the note leading S once ARC has acted (0 without one)
    window: int          # the context window L is taken from
    humans: int = 0      # cap on W, the user's messages shown after F once they left H
    humans_most: int = 0  # the most W takes (S and H at their minimum): none is left out below it
    thinking: int = 0    # cap on the current loop's thinking shown whole (inside H)

    @property
    def answer(self) -> int:
        """The room kept free for the answer: context_window - L."""
        return self.window - self.total

    @classmethod
    def for_prefix(cls, config: ArcConfig, prefix_tokens: int, note_tokens: int = 0,
                   answer_tokens: int = 0) -> "Budgets":
        """The caps for F of ``prefix_tokens``. ``answer_tokens``: the room a request asks to
        keep free for its answer; granted beyond G_max as far as F and the parts' minimum allow
        up to ``answer_room_percent`` of the window (the answer's room beyond is what the view
        leaves), never below G_max."""
        most = min(config.context_window - prefix_tokens - config.minimum_tokens - note_tokens,
                   config.context_window * config.answer_room_percent // 100)
        answer = max(config.max_tokens, min(answer_tokens, most))
        total = config.context_window - answer
        room = total - prefix_tokens
        fixed = config.minimum_recent_tokens + SUMMARY_MINIMUM_TOKENS + note_tokens
        overhead, catalog = config.overhead_tokens, config.catalog_budget_tokens
        chunk = config.recall_chunk_tokens
        # What the full-size parts lack; each gives way down to its smallest useful size.
        short = fixed + overhead + catalog + chunk + RECALL_FRAMING_TOKENS - room
        chunk, short = give_way(chunk, config.minimum_recall_chunk_tokens, short)
        catalog, short = give_way(catalog, config.minimum_catalog_tokens, short)
        overhead, short = give_way(overhead, config.minimum_overhead_tokens, short)
        if short > 0:
            raise PrefixTooLarge(refusal(config, prefix_tokens, note_tokens))
        free = room - overhead
        recall = min(config.recall_budget_tokens, free - fixed - catalog)
        left = free - catalog - recall - note_tokens
        # S gives way to H first: H holds the turns the agent is working with.
        summary = max(SUMMARY_MINIMUM_TOKENS,
                      min(config.summary_budget_tokens, left - config.recent_budget_tokens))
        per_page = max(1, (catalog - CATALOG_HEADER_TOKENS) // (config.stub_max_tokens + 1))
        recent = left - summary
        most = max(0, summary - SUMMARY_MINIMUM_TOKENS) + max(0, recent - config.minimum_recent_tokens)
        return cls(prefix_tokens, summary, recent, catalog, recall, total, chunk,
                   min(per_page, config.stubs_per_page), overhead, note_tokens, config.context_window,
                   min(config.human_budget_tokens, most), most, min(config.thinking_budget_tokens, recent // 2))


def give_way(size: int, smallest: int, short: int) -> tuple[int, int]:
    """``size`` cut by what is ``short``, never below ``smallest``; and what is still short."""
    cut = max(0, min(short, size - smallest))
    return size - cut, short - cut


def refusal(config: ArcConfig, prefix_tokens: int, note_tokens: int) -> str:
    """The exact reason a prefix cannot be served: every smallest part, and F's maximum."""
    total = config.input_budget_tokens
    minimum = config.minimum_tokens + note_tokens
    note = f", ARC's note {note_tokens}" if note_tokens else ""
    return (f"the task prefix F (system prompt + task + tools) is {prefix_tokens} tokens; "
            f"with L = {total} (context window {config.context_window} - max_tokens "
            f"{config.max_tokens}) the other parts need at least {minimum} in their smallest "
            f"form (eta {config.minimum_overhead_tokens}, the newest turn "
            f"{config.minimum_recent_tokens}, a catalog page of one stub "
            f"{config.minimum_catalog_tokens}, one recall chunk "
            f"{config.minimum_recall_chunk_tokens + RECALL_FRAMING_TOKENS}, the summary header "
            f"{SUMMARY_MINIMUM_TOKENS}{note}), so F may be at most {total - minimum} tokens; "
            "shorten the system prompt or task, or serve a longer context window")


if __name__ == "__main__":
    import sys

    config = ArcConfig.for_window(4096, 512)
    print(Budgets.for_prefix(config, int(sys.argv[1]) if len(sys.argv) > 1 else 900))
