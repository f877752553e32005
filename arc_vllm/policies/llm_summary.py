"""llm_summary: the model rewrites older steps into a running natural-language summary.

Drops: whatever the summary leaves out or paraphrases; exact strings (IDs, tokens, numbers)
survive only if the model copies them, and once dropped nothing brings them back. Costs:
one extra model call per fold (the old summary plus the folded steps in, up to
``fold_max_tokens`` out), counted and timed as extra model work in the trajectory.
"""

from __future__ import annotations

from arc_vllm.policies.folding import Folding

INSTRUCTION = ("You maintain the running summary of an agent's work. Rewrite the summary so it "
               "covers the new steps too. Keep every exact value the task may need (names, "
               "numbers, codes) verbatim. Reply with the summary only.")


class LlmSummary(Folding):
    name = "llm_summary"
    memory_title = "Summary of earlier steps"

    def fold_messages(self, steps_text: str) -> list[dict]:
        return [{"role": "system", "content": INSTRUCTION},
                {"role": "user", "content": f"Task: {self.task}\n\nSummary so far:\n{self.memory or '(none)'}"
                                            f"\n\nNew steps:\n{steps_text}"}]

    def absorb(self, completion_text: str) -> None:
        self.memory = completion_text.strip()
