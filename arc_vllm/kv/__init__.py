"""KV reuse's own ideas, below both the server and the agent harness that use them:

    spans.py   the token arithmetic: what of a prompt an earlier one computed (claims, runs,
               warm-up stage boundaries)

``MIN_RUN``, and ``KV_CONNECTOR``, the vLLM ``kv_transfer_config`` that installs ARC's connector
(``serving/kv_connector.py``), used by ``--arc-kv-reuse`` and by ``VllmBackend(kv_reuse=True)``.
Pure Python: no vLLM or torch.
"""

# The shortest run of tokens worth claiming. The connector reads ``min_run`` from its
# ``kv_connector_extra_config`` (this by default); whoever stages a prompt (the server's
# warm-up, the in-process backend, the bench) stages with the same value, or stages and claims
# would disagree.
MIN_RUN = 16

KV_CONNECTOR = {"kv_connector": "ArcKVConnector", "kv_role": "kv_both",
                "kv_connector_module_path": "arc_vllm.serving.kv_connector"}
