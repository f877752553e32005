"""One rule for recognising an engine's context-length refusal, wherever it arrives.

vLLM says "This model's maximum context length is N tokens. However, your prompt contains M
input tokens ..." (``VLLMValidationError`` offline, HTTP 400 over HTTP); other engines say
"context length ... tokens" or "prompt is too long". Everything that reacts to a refusal
(the serving chat path, the agent backends) asks ``is_context_length_error``.

Run ``python -m arc_vllm.core.errors TEXT`` to test a message.
"""

from __future__ import annotations

import json
import re

_PATTERN = re.compile(r"maximum context length|context length.*tokens?|(prompt|input) is too long",
                      re.IGNORECASE | re.DOTALL)


def is_context_length_error(error: object) -> bool:
    """Whether ``error`` (an exception, a message, or a pydantic error response) is the
    engine refusing a prompt as longer than its context window."""
    if hasattr(error, "model_dump"):
        error = json.dumps(error.model_dump())
    return bool(_PATTERN.search(str(error)))


if __name__ == "__main__":
    import sys

    print(is_context_length_error(" ".join(sys.argv[1:])))
