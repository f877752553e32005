"""arc-vllm: Addressable Recall Compaction (ARC) for long-running LLM agents on vLLM.

Layers (imports only point downwards; ``docs/layout.md`` lists the rules, ``tests/test_layers.py``
checks them): the leaves (``paths``, ``offline``, ``console``, ``model_prep``, ``ray_cluster``),
``core`` (pure Python: store, citations, recall, catalog, compaction, the bounded view),
``kernels`` (``arc_vllm.kernels``: KV relocation), ``kv`` (KV reuse), ``policies``, the agent
side (``agent``, ``replay``, ``evaluation``), ``serving`` (the vLLM plugin), ``inspector``,
``cost``, ``reports`` and ``cli``.

Entry points: ``arc-vllm`` (``cli``: serve, replay, bench, report, cost, profile,
prepare-model), and vLLM's plugin groups ``vllm.general_plugins`` and
``vllm.endpoint_plugins`` (``serving.plugin``: ``vllm serve MODEL --arc``).
"""

__version__ = "0.1.0"
