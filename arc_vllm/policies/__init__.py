"""Context policies behind one protocol (``base.ContextPolicy``): ARC, the paper's five
baselines, and the context managers agent users run today (``PEERS``: SWE-agent's and
OpenHands' maskers and windows, ``policies/step_history.py``).

``full_context``, ``sliding_window``, ``rag_memory``, ``arc`` and the peers need no model of
their own; ``llm_summary`` and ``structured_state`` call one (``MODEL_POLICIES``: pass
``backend=``).
"""

from arc_vllm.policies.arc import ArcPolicy
from arc_vllm.policies.base import ContextOverflow, ContextPolicy
from arc_vllm.policies.full_context import FullContext
from arc_vllm.policies.llm_summary import LlmSummary
from arc_vllm.policies.openhands_masking import OpenHandsMasking
from arc_vllm.policies.openhands_recent import OpenHandsRecent
from arc_vllm.policies.openhands_window import OpenHandsWindow
from arc_vllm.policies.rag_memory import RagMemory
from arc_vllm.policies.sliding_window import SlidingWindow
from arc_vllm.policies.structured_state import StructuredState
from arc_vllm.policies.swe_agent_closed_window import SweAgentClosedWindow
from arc_vllm.policies.swe_agent_last_n import SweAgentLastN

POLICIES = {"full_context": FullContext, "sliding_window": SlidingWindow, "llm_summary": LlmSummary,
            "structured_state": StructuredState, "rag_memory": RagMemory, "arc": ArcPolicy,
            "swe_agent_last_n": SweAgentLastN, "swe_agent_closed_window": SweAgentClosedWindow,
            "openhands_masking": OpenHandsMasking, "openhands_window": OpenHandsWindow,
            "openhands_recent": OpenHandsRecent}
MODEL_POLICIES = ("llm_summary", "structured_state")
PAPER_METHODS = ("arc", "full_context", "sliding_window", "llm_summary", "structured_state", "rag_memory")
PEERS = ("swe_agent_last_n", "swe_agent_closed_window", "openhands_masking", "openhands_window",
         "openhands_recent")


def make_policy(method: str, counter, budget_tokens: int, *, task: str, config=None, backend=None):
    """One policy by name, with what that method needs (ARC its config, folds a backend)."""
    if method not in POLICIES:
        raise ValueError(f"unknown method {method!r}; available: {', '.join(POLICIES)}")
    extra = {"config": config} if method == "arc" else {"backend": backend} if method in MODEL_POLICIES else {}
    return POLICIES[method](counter, budget_tokens, task=task, **extra)


__all__ = ["POLICIES", "MODEL_POLICIES", "PAPER_METHODS", "PEERS", "make_policy", "ContextPolicy", "ContextOverflow", "ArcPolicy",
           "FullContext", "LlmSummary", "RagMemory", "SlidingWindow", "StructuredState"]
