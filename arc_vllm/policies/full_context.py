"""full_context: no compaction. Keeps every step verbatim.

Drops: nothing. Costs: the prompt grows with every step, so a long task overflows the
window; it has no answer to an overflow (``on_overflow`` raises ``ContextOverflow``).
It is the shared history of ``policies/step_history.py`` with nothing masked.
"""

from __future__ import annotations

from arc_vllm.policies.step_history import StepHistory


class FullContext(StepHistory):
    name = "full_context"
