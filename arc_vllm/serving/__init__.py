"""The vLLM serving extension: ``vllm serve MODEL --arc`` (``plugin``) and ``arc-vllm serve``
(``launcher``, ``serve_arguments``), as rooms that import downwards only:

    apis/         the adapters of each conversational API vLLM serves: chat completions,
                  Anthropic Messages (+ its compaction), Responses (+ its compaction), and
                  ``translated`` (a resent conversation translated only past what was kept)
    step/         one request through ARC, the same for every API: ``chat`` (ChatStep,
                  complete), ``stream``, ``engine``, ``record``, ``stream_filter``, ``tools``,
                  ``kv_warmup``
    compaction/   compaction asked of a request, answered from the store: ``ask``, ``handle``,
                  ``turns``
    sessions/     ``session``, ``manager``, ``storage`` + ``folder`` + ``redis_store`` (where
                  sessions live; ``places`` reads ``--arc-store``, ``parts`` what changed),
                  ``conversation_keys``, ``conversation_index``, ``seen_conversations``,
                  ``ownership``, ``locks``
    errors, metrics, processes   the leaves, importable from every room

and at the top: ``routes`` (ARC's routes; the one place they go ahead of vLLM's), ``api_route``
(ARC's route in front of each conversational one: routing resolved once), ``inspector_routes``,
``scheduler`` (the engine-side hook), ``local`` (a test and client harness) and ``ray/`` (the
front and the replica of ``--ray-replicas``). ``tests/test_layers.py`` holds each room to what
its docstring says it may import.
"""
