"""One request through ARC, the same for every API: the step, from taking its messages in to
its record.

    chat           ``ChatStep`` and ``complete``: the view, the engine call, the recall loop
    stream         the streamed step (``open_stream``, ``relay``)
    engine         ``ChatEngine``: vLLM's chat handler and request model, built once
    record         ``StepRecord``: the ``arc`` object and the session's record, one name each
    stream_filter  ``HeldBack``: what of a stream may still be an ARC command
    tools          ARC's commands offered as tools, served inside the server
    kv_warmup      ``--arc-kv-reuse``'s warm-up stages, sent before the engine call

May import: ``compaction``, ``sessions``, ``arc_vllm.core`` and ``arc_vllm.kv``, the base
modules and the serving leaves; nothing of apis or the routes.
"""
