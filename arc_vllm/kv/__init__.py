"""KV reuse, one package: ARC's KV-reuse connector on vLLM, and the ideas it shares with the
server, the agent harness and replay.

Pure Python (no vLLM or torch), used by the connector and by everyone else:

    spans.py       the token arithmetic: runs an earlier prompt holds, claim pieces, where
                   warm-up stages end
    claims.py      what the connector claims for a session's prompt (a stage's tail, then the
                   last view's runs); ``ClaimReplay`` runs that rule without an engine, for
                   replay's figures
    warmup.py      the warm-up stage planner, behind a "send these prompts" callable
    extra_args.py  ARC's keys on a request (``arc_session``, ``arc_kv_save``, ...), typed
    config.py      the connector's knobs (``min_run``, ``host_tokens``) and its
                   ``kv_transfer_config``, read by the connector and every stager alike

The connector, loaded by vLLM (``--arc-kv-reuse``, or ``kv_connector_module_path
"arc_vllm.kv.connector"``):

    connector.py            vLLM's ``KVConnectorBase_V1``: a shim over its two halves
    connector_scheduler.py  the scheduler half (engine core): claims, saves, drops
    connector_worker.py     the worker half: host copies of saved KV, the fill, the check
    connector_meta.py       what the halves tell each other, and the stats they report
    layout_check.py         the KV layout the engine chose, and the start-up self-check
"""
