"""ARC's KV-reuse connector on the real CPU engine (tiny model, float32), against full recomputation.

- A compacted prompt (the last prompt's head, new text, then a long run of the last prompt
  moved right): after the warm-up the connector claims exactly what ``claim_pieces`` plans,
  the engine computes only the rest, and the filled layer-0 K and V equal the engine's own for
  the same prompt computed from scratch (layer 0 sees only token and position); layer 1 differs
  (the text before the run changed), which is what ``bench kv-reuse`` measures.
- A claim whose text keeps its context (the last prompt's own continuation past the last whole
  block): every layer is exact, so the next token's logprobs equal full recomputation's.
- KV already moved once is never moved again (the error of one move does not add up).
- Requests without ``arc_session`` are never claimed for; a session saved before others filled
  ``host_tokens`` is dropped on both sides and claims nothing.

Runs its engine in a process of its own (a second in-process engine would disturb the
session's shared one).

    pytest tests/test_kv_connector.py
"""

import json
import os
import subprocess
import sys

import pytest
import torch

from arc_vllm.model_prep import prepare_tiny

HEAD = list(range(1000, 1128))  # 128 tokens: the prefix both prompts share (one block)
NEW = list(range(5000, 5040))  # the compaction's new text
RUN = list(range(2000, 2300))  # kept text, moved 40 tokens right in the compacted prompt
TAIL = list(range(3000, 3020))
LAST = HEAD + RUN + TAIL
COMPACTED = HEAD + NEW + RUN + TAIL
HOST_TOKENS = 600


def prefill(llm, request_id: str, tokens: list[int], session: str | None = None,
            save: bool = True) -> dict:
    """Run ``tokens`` to its first sampled token, read what the engine holds for it, finish it."""
    from vllm import SamplingParams, TokensPrompt

    engine = llm.llm_engine
    extra = {"arc_session": session, "arc_kv_save": save} if session else None
    engine.add_request(request_id, TokensPrompt(prompt_token_ids=tokens),
                       SamplingParams(max_tokens=2, ignore_eos=True, logprobs=10, extra_args=extra))
    core = engine.engine_core.engine_core
    while True:
        outputs = [output for output in engine.step() if output.outputs[0].token_ids]
        if outputs:
            break
    [internal] = [key for key in core.scheduler.requests if key.startswith(request_id + "-")]
    [blocks] = core.scheduler.kv_cache_manager.get_block_ids(internal)
    size = core.scheduler.block_size
    slots = torch.tensor([blocks[i // size] * size + i % size for i in range(len(tokens))])
    caches = core.model_executor.driver_worker.worker.model_runner.kv_caches
    from arc_vllm.kernels.cpu_layout import read_tokens

    held = [read_tokens(caches[layer], slots) for layer in (0, 1)]
    first = outputs[0].outputs[0].logprobs[0]
    while engine.has_unfinished_requests():
        engine.step()
    return {"layers": held, "cached": outputs[0].num_cached_tokens,
            "logprobs": {token: entry.logprob for token, entry in first.items()}}


def engine_check() -> dict:
    from vllm import LLM

    from arc_vllm.agent.kv_spans import claim_pieces, claimed_tokens, index_runs, warmup_boundaries
    from arc_vllm.serving.plugin import KV_CONNECTOR

    # Room for one saved prompt: a second session's save drops the first's.
    llm = LLM(model=str(prepare_tiny()), enforce_eager=True, max_model_len=1024, dtype="float32",
              enable_prefix_caching=True, gpu_memory_utilization=0.1,
              kv_transfer_config=dict(KV_CONNECTOR, kv_connector_extra_config={"host_tokens": HOST_TOKENS}))
    connector = llm.llm_engine.engine_core.engine_core.scheduler.connector
    block = llm.llm_engine.vllm_config.cache_config.block_size
    result = {"block_size": block}
    # Moved run, with reuse.
    prefill(llm, "last", LAST, session="s")
    [warm] = warmup_boundaries(LAST, COMPACTED, block, 16)
    prefill(llm, "warm-up", COMPACTED[:warm], session="s", save=False)
    before = connector.claimed_total
    reused = prefill(llm, "compacted", COMPACTED, session="s")
    claimed = connector.claimed_total - before
    planned = claim_pieces(LAST, index_runs(LAST, 16), COMPACTED, warm, 16)
    result.update(warm=warm, claimed=claimed, planned=claimed_tokens(planned), cached=reused["cached"])
    # Move the run again (other new text before it): the view saved for "s" holds it moved, so
    # nothing of it is claimed; for "u", whose saved view computed it, it is.
    again = HEAD + list(range(6000, 6060)) + RUN + TAIL
    [stage] = warmup_boundaries(COMPACTED, again, block, 16)
    for session in ("s", "u"):
        llm.reset_prefix_cache()
        if session == "u":
            prefill(llm, "compacted-u", COMPACTED, session="u")
            llm.reset_prefix_cache()
        prefill(llm, f"stage-{session}", again[:stage], session=session, save=False)
        before = connector.claimed_total
        prefill(llm, f"again-{session}", again, session=session, save=False)
        result[f"claimed_again_{session}"] = connector.claimed_total - before
    result.update(again_claimable=len(again) - 1 - stage, again_stage=stage, again_run_start=len(HEAD) + 60)
    # The same prompt recomputed from scratch, without a session.
    llm.reset_prefix_cache()
    prefill(llm, "last-off", LAST)
    before = connector.claimed_total
    recomputed = prefill(llm, "compacted-off", COMPACTED)
    result["claimed_without_session"] = connector.claimed_total - before
    positions = torch.arange(warm, warm + claimed)
    for layer in (0, 1):
        (key, value), (key_off, value_off) = reused["layers"][layer], recomputed["layers"][layer]
        result[f"layer{layer}_key_error"] = (key[positions] - key_off[positions]).abs().max().item()
        result[f"layer{layer}_value_error"] = (value[positions] - value_off[positions]).abs().max().item()
    # A claim that keeps its context: the last prompt's own text past its last whole block.
    llm.reset_prefix_cache()
    same_context = LAST[:200] + list(range(7000, 7030))
    prefill(llm, "last-2", LAST, session="t")
    before = connector.claimed_total
    exact = prefill(llm, "continued", same_context, session="t")
    result["exact_claimed"] = connector.claimed_total - before
    llm.reset_prefix_cache()
    full = prefill(llm, "continued-off", same_context)
    result["exact_logprob_error"] = max(abs(exact["logprobs"][token] - logprob)
                                        for token, logprob in full["logprobs"].items()
                                        if token in exact["logprobs"])
    # Session "t" saved last, so "s" (saved before) was dropped, here and in the worker.
    from vllm.distributed.kv_transfer import get_kv_transfer_group

    result["worker_sessions"] = sorted(get_kv_transfer_group().store)
    result["scheduler_sessions"] = sorted(connector.saved)
    llm.reset_prefix_cache()
    before = connector.claimed_total
    prefill(llm, "after-drop", COMPACTED + [9], session="s")
    result["claimed_after_drop"] = connector.claimed_total - before
    result["exact_common_top"] = len(set(exact["logprobs"]) & set(full["logprobs"]))
    result["exact_same_greedy"] = (max(exact["logprobs"], key=exact["logprobs"].get)
                                   == max(full["logprobs"], key=full["logprobs"].get))
    return result


@pytest.fixture(scope="module")
def check():
    done = subprocess.run([sys.executable, __file__], capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, VLLM_ENABLE_V1_MULTIPROCESSING="0"))
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_claims_what_was_planned_and_the_engine_computes_only_the_rest(check):
    block = check["block_size"]
    run_start = len(HEAD) + len(NEW)
    # The warm-up ends on the first block boundary inside the moved run ...
    assert check["warm"] == -(-run_start // block) * block
    # ... and the claim covers the run from there (the last prompt token is never claimed).
    assert check["claimed"] == check["planned"] == len(COMPACTED) - 1 - check["warm"]
    assert check["cached"] == check["warm"] + check["claimed"]
    assert check["claimed_without_session"] == 0


@pytest.mark.slow
def test_filled_layer0_kv_equals_full_recomputation_and_deeper_layers_do_not(check):
    assert check["layer0_key_error"] < 1e-4 and check["layer0_value_error"] < 1e-5
    assert check["layer1_key_error"] > 1e-3


@pytest.mark.slow
def test_kv_is_moved_at_most_once(check):
    # In the view saved for "s" the run's head, up to the warm-up's end, was computed and the
    # rest moved: only the computed head is claimed again (from the new stage's end).
    computed_head = check["warm"] - (len(HEAD) + len(NEW))
    already_in = check["again_stage"] - check["again_run_start"]
    assert check["claimed_again_s"] == computed_head - already_in > 0
    assert check["claimed_again_u"] == check["again_claimable"]  # all computed there: claimed


@pytest.mark.slow
def test_sessions_beyond_the_host_budget_are_dropped_on_both_sides(check):
    assert check["scheduler_sessions"] == check["worker_sessions"] == ["t"]
    assert check["claimed_after_drop"] == 0  # "s" has nothing saved any more


@pytest.mark.slow
def test_a_claim_that_keeps_its_context_is_exact(check):
    assert check["exact_claimed"] == 200 - check["block_size"]
    # Same greedy token, same logprobs (the random model's near-ties may reorder the tail of
    # its top 10, so the two top lists are compared where they overlap).
    assert check["exact_same_greedy"] and check["exact_common_top"] >= 8
    assert check["exact_logprob_error"] < 1e-4


if __name__ == "__main__":
    print(json.dumps(engine_check()))
