"""arc-vllm: Addressable Recall Compaction (ARC) for long-running LLM agents on vLLM.

Layers (imports only point downwards): ``core`` (pure Python: store, citations, recall,
catalog, compaction, bounded view), ``policies``, ``agent``, ``serving``, ``cost``.
Run ``arc-vllm --help`` for the commands.
"""

__version__ = "0.1.0"
