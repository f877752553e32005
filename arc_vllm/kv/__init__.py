"""KV reuse's own ideas, below both the server and the agent harness that use them. Pure Python:
no vLLM or torch.

    spans.py       the token arithmetic: runs an earlier prompt holds, claim pieces, where
                   warm-up stages end
    claims.py      what the connector claims for a session's prompt (move-once rule included);
                   ``ClaimReplay`` runs that rule without an engine, for replay's figures
    warmup.py      the warm-up stage planner, behind a "send these prompts" callable
    extra_args.py  ARC's keys on a request (``arc_session``, ``arc_kv_save``, ...), typed
    config.py      the connector's knobs (``min_run``, ``host_tokens``) and its
                   ``kv_transfer_config``, read by the connector and every stager alike

The connector itself (vLLM's engine-facing halves) is ``serving/kv_connector.py``.
"""
