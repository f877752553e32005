"""A vLLM logits processor for servers of the tiny random-weight model: every answer ends with
the end-of-sequence token after ``ARC_TEST_ANSWER_TOKENS`` tokens (default 8).

A random-weight model never chooses to stop, so each answer would run to its ``max_tokens``;
clients that treat an answer cut at its limit as an error (Claude Code's ``-p`` reports "the
response exceeded the output token maximum") could then never finish a turn. With this the
model's few tokens are still its own; only the length is fixed. Load it in the server with
``--logits-processors tests.helpers.short_answers:ShortAnswers`` (the repository root on
``PYTHONPATH``).
"""

import os

import torch
from vllm.v1.sample.logits_processor import BatchUpdate, LogitsProcessor


class ShortAnswers(LogitsProcessor):
    def __init__(self, vllm_config, device: torch.device, is_pin_memory: bool):
        self.length = int(os.environ.get("ARC_TEST_ANSWER_TOKENS", "8"))
        self.end = vllm_config.model_config.hf_config.eos_token_id
        self.outputs: dict[int, list[int]] = {}  # batch row -> its (live) output token ids

    def is_argmax_invariant(self) -> bool:
        return False

    def update_state(self, batch_update: BatchUpdate | None) -> None:
        if batch_update is None:
            return
        for index in batch_update.removed:
            self.outputs.pop(index, None)
        for index, _params, _prompt, output in batch_update.added:
            self.outputs[index] = output
        for first, second, directionality in batch_update.moved:
            a, b = self.outputs.pop(first, None), self.outputs.pop(second, None)
            if a is not None:
                self.outputs[second] = a
            if b is not None and directionality.name == "SWAP":
                self.outputs[first] = b

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        for index, output in self.outputs.items():
            if index < logits.shape[0] and len(output) >= self.length:
                logits[index] = float("-inf")
                logits[index, self.end] = 0.0
        return logits
