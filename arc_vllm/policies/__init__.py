"""Context policies behind one protocol (``base.ContextPolicy``): ARC and the baselines.

Built so far: ``full_context``, ``sliding_window``, ``rag_memory``, ``arc``. Still to come
(issue 3): ``llm_summary`` and ``structured_state`` (they need a model backend).
"""

from arc_vllm.policies.arc import ArcPolicy
from arc_vllm.policies.base import ContextOverflow, ContextPolicy
from arc_vllm.policies.full_context import FullContext
from arc_vllm.policies.rag_memory import RagMemory
from arc_vllm.policies.sliding_window import SlidingWindow

POLICIES = {"full_context": FullContext, "sliding_window": SlidingWindow, "rag_memory": RagMemory,
            "arc": ArcPolicy}

__all__ = ["POLICIES", "ContextPolicy", "ContextOverflow", "ArcPolicy", "FullContext", "RagMemory",
           "SlidingWindow"]
