"""Measure a real vLLM engine: decode step time per (context, batch), prefill time per prompt
length, the KV bytes it actually holds per token, and peak memory.

The engine runs in this process (``offline.in_process_engine``, set by the profile command), so each
``LLMEngine.step()`` is one scheduler step plus one forward pass, timed around the call. For a
cell, ``batch`` requests of ``context`` random tokens (no shared prefix, prefix caching off) are
added; steps until every request has its first token are prefill (chunked, possibly mixed with
early decodes); the next ``steps`` steps are pure decode of the whole batch, and their median is
the cell's time. Then the requests are aborted. The KV bytes per token are the scheduler's used
blocks times the bytes of a block (every layer's page), over the tokens held, taken at the first
pure decode step. Used by ``cost.profile``; needs vLLM.
"""

from __future__ import annotations

import random
import statistics
import time


class EngineProbe:
    def __init__(self, model: str, max_context: int, max_batch: int, kv_cache_gib: float | None = None,
                 seed: int = 0):
        from vllm import LLM

        self.max_model_len = max_context + 512  # past the trained window: the profile allows it
        sized = {"kv_cache_memory_bytes": int(kv_cache_gib * 2 ** 30)} if kv_cache_gib is not None else {}
        self.llm = LLM(model=model, enforce_eager=True, max_model_len=self.max_model_len,
                       max_num_seqs=max(max_batch, 1), enable_prefix_caching=False, seed=seed,
                       disable_log_stats=True, **sized)
        self.engine = self.llm.llm_engine
        self.vocab = self.llm.get_tokenizer().vocab_size
        self.random = random.Random(seed)
        self.num_requests = 0

    def scheduler(self):
        return self.engine.engine_core.engine_core.scheduler

    def block_bytes(self) -> int:
        config = self.scheduler().kv_cache_config
        return sum(group.kv_cache_spec.page_size_bytes * len(group.layer_names)
                   for group in config.kv_cache_groups)

    def block_size(self) -> int:
        return self.scheduler().kv_cache_config.kv_cache_groups[0].kv_cache_spec.block_size

    def used_blocks(self) -> int:
        pool = self.scheduler().kv_cache_manager.block_pool
        return pool.num_gpu_blocks - pool.get_num_free_blocks() - 1  # the null block is never free

    def add(self, prompt_tokens: int, max_tokens: int) -> str:
        from vllm import SamplingParams, TokensPrompt

        self.num_requests += 1
        request_id = f"probe-{self.num_requests}"
        tokens = [self.random.randrange(100, self.vocab) for _ in range(prompt_tokens)]
        params = SamplingParams(max_tokens=max_tokens, ignore_eos=True, temperature=0)
        self.engine.add_request(request_id, TokensPrompt(prompt_token_ids=tokens), params)
        return request_id

    def drain(self, request_ids: list[str]) -> None:
        self.engine.abort_request(request_ids)
        while self.engine.has_unfinished_requests():
            self.engine.step()

    def decode_cells(self, context: int, batches: list[int], steps: int = 6) -> list[dict]:
        """Median pure-decode step time of b sequences of ``context`` tokens, for each b in
        ``batches``: the largest batch is prefilled once, timed, then cut down (aborting the
        extra sequences) to each smaller batch in turn."""
        request_ids = [self.add(context, self.max_model_len - context) for _ in range(max(batches))]
        generated = dict.fromkeys(request_ids, 0)
        prefill_s, kv, cells = 0.0, None, []
        while not all(generated.values()):
            start = time.perf_counter()
            outputs = self.engine.step()
            prefill_s += time.perf_counter() - start
            for output in outputs:
                generated[output.request_id] = len(output.outputs[0].token_ids)
        for batch in sorted(batches, reverse=True):
            self.engine.abort_request(request_ids[batch:])
            for request_id in request_ids[batch:]:
                generated.pop(request_id, None)
            request_ids = request_ids[:batch]
            if kv is None:
                # The newest sampled token's KV is written by the coming step, not yet held.
                held = sum(context + count - 1 for count in generated.values())
                kv = {"used_blocks": self.used_blocks(), "tokens_held": held}
            step_times, contexts = [], []
            for _ in range(steps):
                contexts.append(context + sum(generated.values()) / batch)
                start = time.perf_counter()
                outputs = self.engine.step()
                step_times.append(time.perf_counter() - start)
                for output in outputs:
                    generated[output.request_id] = len(output.outputs[0].token_ids)
            cells.append({"nominal_context": context, "batch": batch,
                          "context_tokens": statistics.mean(contexts),
                          "measured_s": statistics.median(step_times), "step_times_s": step_times,
                          "prefill_s": prefill_s, "kv": kv})
            kv = {}  # the KV figure is taken once, with every sequence held
        self.drain(request_ids)
        return sorted(cells, key=lambda cell: cell["batch"])

    def call_seconds(self, prompt_tokens: int, generated_tokens: int) -> float:
        """Wall time of one request alone: its prefill and its decode, to the last token."""
        prompt_tokens = min(prompt_tokens, self.max_model_len - max(generated_tokens, 1) - 1)
        self.add(prompt_tokens, max(generated_tokens, 1))
        start = time.perf_counter()
        while self.engine.has_unfinished_requests():
            self.engine.step()
        return time.perf_counter() - start

    def prefill_seconds(self, prompt_tokens: int) -> float:
        """One prompt, one generated token: the time to its first token."""
        return self.call_seconds(prompt_tokens, 1)

    def kv_bytes_per_token(self, kv: dict) -> float:
        return kv["used_blocks"] * self.block_bytes() / kv["tokens_held"]

    # ---- the profiled-engine interface (cost/profile.py ``ProfiledEngine``) --------------------
    reads_counters = False  # counters would be read around the torch step, not the engine

    @property
    def max_prompt(self) -> int:
        return self.max_model_len - 1

    def kv_bytes(self, cells: list[dict], model) -> dict:
        """What the engine held at the largest cell (its first pure decode step), beside what
        the roofline ``model`` says."""
        largest = max(cells, key=lambda cell: cell["context_tokens"] * cell["batch"])
        return {"measured_bytes_per_token": self.kv_bytes_per_token(largest["kv"]),
                "model_bytes_per_token": model.kv_bytes_per_token, "block_bytes": self.block_bytes(),
                "block_size": self.block_size(), "at": {"context": largest["nominal_context"],
                                                        "batch": largest["batch"], **largest["kv"]}}
