"""The caps of one context, once its task prefix F is known: B is what F is.

    free = L - F - eta
    U  <= recall   = min(Q, free - newest turn's minimum - P - S's minimum)  (>= one chunk)
    S  <= summary  = min(M, what is left beyond R)                            (>= its header)
    H  <= recent   = free - P - recall - summary                              (>= R when F allows)

A prefix is refused only when ``free`` cannot hold ``ArcConfig.minimum_tokens`` minus eta:
the newest turn in its smallest form, one catalog page, one recall chunk and the summary's
header. These are caps, not reservations: the view is compacted only when the whole of it
would exceed L, so a part that uses less leaves the room to the recent turns. ``recent`` is
what compaction keeps H under (with a quarter left free) and the size above which one
turn is shown cited rather than verbatim once a compaction was needed.

Run ``python -m arc_vllm.core.budget F`` to print the caps at a 4,096-token window for a
prefix of F tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

from arc_vllm.core.config import RECALL_FRAMING_TOKENS, SUMMARY_MINIMUM_TOKENS, ArcConfig


class PrefixTooLarge(ValueError):
    """The task prefix leaves less than the minimum the other parts need."""


@dataclass(frozen=True)
class Budgets:
    prefix: int    # F, in tokens (B)
    summary: int   # cap on S
    recent: int    # cap on H after a compaction
    catalog: int   # cap on G (P)
    recall: int    # cap on U
    total: int     # L

    @classmethod
    def for_prefix(cls, config: ArcConfig, prefix_tokens: int) -> "Budgets":
        total = config.input_budget_tokens
        free = total - prefix_tokens - config.overhead_tokens
        minimum = config.minimum_tokens - config.overhead_tokens
        if free < minimum:
            raise PrefixTooLarge(
                f"the task prefix F (system prompt + task + tools) is {prefix_tokens} tokens; "
                f"with L = {total} (context window {config.context_window} - max_tokens "
                f"{config.max_tokens}) the other parts need at least {config.minimum_tokens} "
                f"(eta {config.overhead_tokens}, the newest turn {config.minimum_recent_tokens}, "
                f"one catalog page {config.catalog_budget_tokens}, one recall chunk "
                f"{config.recall_chunk_tokens + RECALL_FRAMING_TOKENS}, the summary header "
                f"{SUMMARY_MINIMUM_TOKENS}), so F may be at most {total - config.minimum_tokens} "
                "tokens; shorten the system prompt or task, or serve a longer context window")
        catalog = config.catalog_budget_tokens
        recall = min(config.recall_budget_tokens,
                     free - config.minimum_recent_tokens - catalog - SUMMARY_MINIMUM_TOKENS)
        left = free - catalog - recall
        # S gives way to H first: H holds the turns the agent is working with.
        summary = max(SUMMARY_MINIMUM_TOKENS,
                      min(config.summary_budget_tokens, left - config.recent_budget_tokens))
        return cls(prefix_tokens, summary, left - summary, catalog, recall, total)


if __name__ == "__main__":
    import sys

    config = ArcConfig.for_window(4096, 512)
    print(Budgets.for_prefix(config, int(sys.argv[1]) if len(sys.argv) > 1 else 900))
