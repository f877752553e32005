"""A vLLM logits processor for servers of the tiny random-weight models: every answer ends with
the end-of-sequence token after ``ARC_TEST_ANSWER_TOKENS`` tokens (default 8), unless the request
names the exact tokens to say (``vllm_xargs.arc_test_forced``: token ids, ending in EOS).

A random-weight model never chooses to stop, so each answer would run to its ``max_tokens``;
clients that treat an answer cut at its limit as an error (Claude Code's ``-p`` reports "the
response exceeded the output token maximum") could then never finish a turn. With this the
model's few tokens are still its own; only the length is fixed. A test that needs the model to
think and then call a tool (``<think>…</think>`` and a ``<tool_call>``, an ARC ``_recall`` among
them) forces it token by token, on any API (each carries ``vllm_xargs`` to the engine as
``SamplingParams.extra_args``; ARC's in-server passes of the request get the same). Load it in
the server with ``--logits-processors tests.helpers.short_answers:ShortAnswers`` (the repository
root on ``PYTHONPATH``).
"""

import os

import torch
from vllm.v1.sample.logits_processor import BatchUpdate, LogitsProcessor
from vllm.v1.sample.logits_processor.builtin import process_dict_updates

FORCED = "arc_test_forced"


class ShortAnswers(LogitsProcessor):
    def __init__(self, vllm_config, device: torch.device, is_pin_memory: bool):
        self.length = int(os.environ.get("ARC_TEST_ANSWER_TOKENS", "8"))
        self.end = vllm_config.model_config.hf_config.eos_token_id
        # batch row -> (the tokens to say, or None: any, ending after ``length``; its live output ids)
        self.outputs: dict[int, tuple[list[int] | None, list[int]]] = {}

    def is_argmax_invariant(self) -> bool:
        return False

    @staticmethod
    def added(params, _prompt, output: list[int]):
        forced = (params.extra_args or {}).get(FORCED) if params is not None else None
        return ([int(token) for token in forced] if forced else None), output

    def update_state(self, batch_update: BatchUpdate | None) -> None:
        process_dict_updates(self.outputs, batch_update, self.added)

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        for index, (forced, output) in self.outputs.items():
            if index >= logits.shape[0]:
                continue
            if forced is not None:
                token = forced[len(output)] if len(output) < len(forced) else self.end
            elif len(output) >= self.length:
                token = self.end
            else:
                continue
            logits[index] = float("-inf")
            logits[index, token] = 0.0
        return logits
