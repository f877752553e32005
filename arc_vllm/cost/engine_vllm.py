"""Measure a real vLLM engine: decode step time per (context, batch), prefill time per prompt
length, the KV bytes it actually holds per token, and peak memory.

The engine runs in this process (``offline.in_process_engine``, set by the profile command), so each
``LLMEngine.step()`` is one scheduler step plus one forward pass, timed around the call. For a
cell, ``batch`` requests of ``context`` random tokens are added (the same prompts every time a
context is visited, so that from the second visit on vLLM's prefix cache supplies them and a
cell can be measured again, in any order, without paying its prefill again); steps until
every request has its first token are prefill; the next ``steps`` steps are pure decode of the
whole batch, and their median is the cell's time. Then the requests are aborted. The KV bytes
per token are the scheduler's used blocks times the bytes of a block (every layer's page),
over the tokens held, at the first pure decode step. A call (``call_seconds``, the prefill
figures and the trace replay) is fresh random tokens: nothing of it is cached. Used by
``cost.profile``; needs vLLM.
"""

from __future__ import annotations

import random
import statistics
import time

from arc_vllm.vllm_compat import engine_scheduler


class EngineProbe:
    def __init__(self, model: str, max_context: int, max_batch: int, kv_cache_gib: float | None = None,
                 seed: int = 0):
        from vllm import LLM

        self.max_model_len = max_context + 512  # past the trained window: the profile allows it
        sized = {"kv_cache_memory_bytes": int(kv_cache_gib * 2 ** 30)} if kv_cache_gib is not None else {}
        self.llm = LLM(model=model, enforce_eager=True, max_model_len=self.max_model_len,
                       max_num_seqs=max(max_batch, 1), enable_prefix_caching=True, seed=seed,
                       disable_log_stats=True, **sized)
        self.engine = self.llm.llm_engine
        self.vocab = self.llm.get_tokenizer().vocab_size
        self.seed = seed
        self.random = random.Random(seed)
        self.num_requests = 0
        self.prompts: dict[int, list[list[int]]] = {}  # context -> the cells' prompts, reused

    def scheduler(self):
        return engine_scheduler(self.llm)

    def block_bytes(self) -> int:
        config = self.scheduler().kv_cache_config
        return sum(group.kv_cache_spec.page_size_bytes * len(group.layer_names)
                   for group in config.kv_cache_groups)

    def block_size(self) -> int:
        return self.scheduler().kv_cache_config.kv_cache_groups[0].kv_cache_spec.block_size

    def used_blocks(self) -> int:
        pool = self.scheduler().kv_cache_manager.block_pool
        return pool.num_gpu_blocks - pool.get_num_free_blocks() - 1  # the null block is never free

    def add(self, prompt_tokens: int | list[int], max_tokens: int) -> str:
        """A request of these tokens (or of that many fresh random ones)."""
        from vllm import SamplingParams, TokensPrompt

        self.num_requests += 1
        request_id = f"probe-{self.num_requests}"
        tokens = prompt_tokens if isinstance(prompt_tokens, list) else \
            [self.random.randrange(100, self.vocab) for _ in range(prompt_tokens)]
        params = SamplingParams(max_tokens=max_tokens, ignore_eos=True, temperature=0)
        self.engine.add_request(request_id, TokensPrompt(prompt_token_ids=tokens), params)
        return request_id

    def prompts_of(self, context: int, count: int) -> list[list[int]]:
        """The first ``count`` prompts of ``context`` tokens: the same at every visit."""
        kept = self.prompts.setdefault(context, [])
        draw = random.Random(f"{self.seed}:{context}:{len(kept)}")
        while len(kept) < count:
            kept.append([draw.randrange(100, self.vocab) for _ in range(context)])
        return kept[:count]

    def drain(self, request_ids: list[str]) -> None:
        self.engine.abort_request(request_ids)
        while self.engine.has_unfinished_requests():
            self.engine.step()

    def decode_cell(self, context: int, batch: int, steps: int = 6) -> dict:
        """Median pure-decode step time of ``batch`` sequences of ``context`` tokens (their
        prefill untimed: from the prefix cache after a context's first visit)."""
        request_ids = [self.add(prompt, self.max_model_len - context) for prompt in self.prompts_of(context, batch)]
        generated = dict.fromkeys(request_ids, 0)
        while not all(generated.values()):
            for output in self.engine.step():
                generated[output.request_id] = len(output.outputs[0].token_ids)
        # The newest sampled token's KV is written by the coming step, not yet held.
        kv = {"used_blocks": self.used_blocks(), "tokens_held": sum(context + count - 1 for count in generated.values())}
        step_times, contexts = [], []
        for _ in range(steps):
            contexts.append(context + sum(generated.values()) / batch)
            start = time.perf_counter()
            outputs = self.engine.step()
            step_times.append(time.perf_counter() - start)
            for output in outputs:
                generated[output.request_id] = len(output.outputs[0].token_ids)
        self.drain(request_ids)
        return {"nominal_context": context, "batch": batch, "context_tokens": statistics.mean(contexts),
                "measured_s": statistics.median(step_times), "step_times_s": step_times, "kv": kv}

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
