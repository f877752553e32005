"""The vLLM serving extension: ``vllm serve MODEL --arc`` (``plugin``) and ``arc-vllm serve``
(``launcher``, ``serve_arguments``); ARC's route in front of each conversational API vLLM
serves (``api_route``, the adapters in ``apis/``: chat completions, Anthropic Messages,
Responses) over the one ARC path (``chat``, ``chat_stream``, ``chat_engine``, ``step_record``,
``stream_filter``, ``tools``);
server-side sessions (``sessions``, ``session_manager``, ``session_lock``, implicit ones by
``conversation_keys`` and ``conversation_index``); the session routes (``routes``,
``inspector_routes``), ``metrics``, the engine-side hook (``scheduler``), KV reuse's warm-up
(``kv_warmup``), the Ray front (``ray_serve``, ``ray_replica``) and ``local`` (a test and
client harness)."""
