"""ARC's KV-reuse connector on the real CPU engine (tiny model), against full recomputation, in
float32 and bfloat16 (the dtypes that change vLLM-CPU's attention ISA and so its KV layout: on
an AMX machine bfloat16 takes ``amx``, elsewhere ``vec``).

- The ISA the engine picked for the dtype is one the connector writes, and its start-up layout
  check passed (``kv/layout_check.py``); a deliberately wrong layout is caught by that
  check: reuse off, ``arc_kv_reuse_enabled`` 0, nothing claimed, the output that of recomputation.

- A compacted prompt (the last prompt's head, new text, then a long run of the last prompt
  moved right): after the warm-up (a stage up to where the run starts, whose partial block the
  connector supplies to the next) it claims exactly what ``claim_pieces`` plans, the engine
  computes only the rest, and the filled layer-0 K and V equal the engine's own for
  the same prompt computed from scratch (layer 0 sees only token and position); layer 1 differs
  (the text before the run changed), which is what ``bench kv-reuse`` measures.
- A claim whose text keeps its context (the last prompt's own continuation past the last whole
  block): every layer is exact, so the next token's logprobs equal full recomputation's.
- KV moved once is computed again by the next compaction (``max_moves`` 1, the default); with
  ``max_moves`` 2 it is moved again, rotated from where it was computed: its layer-0 K is as
  close to recomputation as after one move.
- Replay's KV figures (``kv/claims.py`` ``ClaimReplay``) predict exactly what the engine's connector
  claimed over the same prompts and warm-up stages.
- Requests without ``arc_session`` are never claimed for; a session saved before others filled
  ``host_tokens`` is dropped on both sides and claims nothing.
- vLLM's connector contract: a request that waits for blocks (a small KV cache, asked again at
  every step) and a session's request after one aborted mid-prefill both claim exactly what
  the plan says, counted once; an abort leaves no state behind.

The engines run outside the tests' process (a second in-process engine would disturb the
session's shared one): one process per dtype, two at a time, each on one torch thread.

    pytest tests/test_kv_connector.py
"""

import json
import subprocess
import sys

import pytest
import torch

from arc_vllm.model_prep import prepare_tiny

pytestmark = pytest.mark.memory(6)  # two engine processes at once
HEAD = list(range(1000, 1128))  # 128 tokens: the prefix both prompts share (one block)
NEW = list(range(5000, 5040))  # the compaction's new text
RUN = list(range(2000, 2300))  # kept text, moved 40 tokens right in the compacted prompt
TAIL = list(range(3000, 3020))
LAST = HEAD + RUN + TAIL
COMPACTED = HEAD + NEW + RUN + TAIL
HOST_TOKENS = 800  # one saved prompt of these (the longest, 784 tokens, alone)
BLOCKS = 10  # a small KV cache, so that a request can be made to wait for blocks
DTYPES = ["float32", "bfloat16"]
# Relative error of KV that should agree: float32 to rounding; bfloat16 keeps 8 mantissa bits.
TOLERANCE = {"float32": 1e-4, "bfloat16": 2 ** -5}


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
        outputs = [output for output in engine.step()
                   if output.request_id.startswith(request_id) and output.outputs[0].token_ids]
        if outputs:
            break
    [internal] = [key for key in core.scheduler.requests if key.startswith(request_id + "-")]
    [blocks] = core.scheduler.kv_cache_manager.get_block_ids(internal)
    size = core.scheduler.block_size
    slots = torch.tensor([blocks[i // size] * size + i % size for i in range(len(tokens))])
    caches = core.model_executor.driver_worker.worker.model_runner.kv_caches
    from arc_vllm.kernels.cpu_layout import read_tokens

    isa = llm.llm_engine.vllm_config.compilation_config.static_forward_context[
        "model.layers.0.self_attn.attn"].isa
    held = [read_tokens(caches[layer], slots, isa) for layer in (0, 1)]
    first = outputs[0].outputs[0].logprobs[0]
    while engine.has_unfinished_requests():
        engine.step()
    return {"layers": held, "cached": outputs[0].num_cached_tokens,
            "logprobs": {token: entry.logprob for token, entry in first.items()}}


def make_engine(dtype: str, **extra):
    from vllm import LLM

    from arc_vllm.kv.config import KVReuseConfig

    # Room for one saved prompt: a second session's save drops the first's. Chunked prefill in
    # 256-token steps, so a request can be aborted mid-prefill.
    return LLM(model=str(prepare_tiny()), enforce_eager=True, max_model_len=1024, dtype=dtype,
               enable_prefix_caching=True, gpu_memory_utilization=0.1, num_gpu_blocks_override=BLOCKS,
               max_num_batched_tokens=256,
               kv_transfer_config=KVReuseConfig(host_tokens=HOST_TOKENS, other=extra).transfer_config())


def relative(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a.float() - b.float()).abs().max() / b.float().abs().max()).item()


def engine_check(dtype: str) -> dict:
    from vllm.distributed.kv_transfer import get_kv_transfer_group
    from vllm.v1.attention.backends.cpu_attn import _get_attn_isa

    from arc_vllm.kv.spans import claim_pieces, claimed_tokens, index_runs, warmup_boundaries
    from arc_vllm.kernels.cpu_layout import CPU_LAYOUTS

    llm = make_engine(dtype)
    connector = llm.llm_engine.engine_core.engine_core.scheduler.connector
    block = llm.llm_engine.vllm_config.cache_config.block_size
    layers = llm.llm_engine.vllm_config.compilation_config.static_forward_context
    worker = get_kv_transfer_group().worker
    result = {"block_size": block, "isas": sorted({layer.isa for layer in layers.values()}),
              "expected_isa": _get_attn_isa(getattr(torch, dtype), block, 64), "known": list(CPU_LAYOUTS),
              "enabled": connector.enabled, "worker_checks": worker.checks,
              "scheduler_checks": connector.scheduler.checks}
    # Moved run, with reuse.
    prefill(llm, "last", LAST, session="s")
    [warm] = warmup_boundaries(LAST, COMPACTED, block, 16)
    staged_before = connector.num_supplied_tokens
    prefill(llm, "warm-up", COMPACTED[:warm], session="s", save=False)
    before = connector.num_supplied_tokens
    reused = prefill(llm, "compacted", COMPACTED, session="s")
    claimed = connector.num_supplied_tokens - before
    planned = claim_pieces(LAST, index_runs(LAST, 16), COMPACTED, warm, 16)
    result.update(warm=warm, claimed=claimed, planned=claimed_tokens(planned), cached=reused["cached"],
                  claimed_with_stages=connector.num_supplied_tokens - staged_before)
    # Move the run again (other new text before it): the view saved for "s" holds it moved, so
    # (max_moves 1) it is computed again; for "u", whose saved view computed it, it is claimed;
    # for "m", saved as "s" was but under max_moves 2, it is claimed again.
    again = HEAD + list(range(6000, 6060)) + RUN + TAIL
    [stage] = warmup_boundaries(COMPACTED, again, block, 16)
    moved_again = {}
    for session in ("s", "u", "m"):
        llm.reset_prefix_cache()
        if session == "u":
            prefill(llm, "compacted-u", COMPACTED, session="u")
            llm.reset_prefix_cache()
        if session == "m":
            connector.scheduler.max_moves = 2
            prefill(llm, "last-m", LAST, session="m")
            prefill(llm, "warm-up-m", COMPACTED[:warm], session="m", save=False)
            prefill(llm, "compacted-m", COMPACTED, session="m")
            llm.reset_prefix_cache()
        staged_before = connector.num_supplied_tokens
        prefill(llm, f"stage-{session}", again[:stage], session=session, save=False)
        before = connector.num_supplied_tokens
        moved_again[session] = prefill(llm, f"again-{session}", again, session=session, save=False)
        result[f"claimed_again_{session}"] = connector.num_supplied_tokens - before
        result[f"claimed_again_{session}_with_stages"] = connector.num_supplied_tokens - staged_before
    connector.scheduler.max_moves = 1
    result.update(again_claimable=len(again) - 1 - stage, again_stage=stage, again_run_start=len(HEAD) + 60)
    llm.reset_prefix_cache()
    again_off = prefill(llm, "again-off", again)
    positions = torch.arange(stage, len(again) - 1)
    for session in ("u", "m"):
        key, key_off = moved_again[session]["layers"][0][0], again_off["layers"][0][0]
        result[f"again_{session}_layer0_key_error"] = relative(key[positions], key_off[positions])
    # The same prompt recomputed from scratch, without a session.
    llm.reset_prefix_cache()
    prefill(llm, "last-off", LAST)
    before = connector.num_supplied_tokens
    recomputed = prefill(llm, "compacted-off", COMPACTED)
    result["claimed_without_session"] = connector.num_supplied_tokens - before
    # The warm-up's partial block (the new text before the run), supplied by the connector to
    # the view as the warm-up computed it: that text saw no moved KV, so it is exact.
    tail = torch.arange(warm // block * block, warm)
    for layer in (0, 1):
        result[f"tail_layer{layer}_key_error"] = relative(reused["layers"][layer][0][tail],
                                                          recomputed["layers"][layer][0][tail])
        result[f"tail_layer{layer}_value_error"] = relative(reused["layers"][layer][1][tail],
                                                            recomputed["layers"][layer][1][tail])
    positions = torch.arange(warm, warm + claimed)
    for layer in (0, 1):
        (key, value), (key_off, value_off) = reused["layers"][layer], recomputed["layers"][layer]
        result[f"layer{layer}_key_error"] = relative(key[positions], key_off[positions])
        result[f"layer{layer}_value_error"] = relative(value[positions], value_off[positions])
    # A claim that keeps its context: the last prompt's own text past its last whole block.
    llm.reset_prefix_cache()
    same_context = LAST[:200] + list(range(7000, 7030))
    prefill(llm, "last-2", LAST, session="t")
    before = connector.num_supplied_tokens
    exact = prefill(llm, "continued", same_context, session="t")
    result["exact_claimed"] = connector.num_supplied_tokens - before
    llm.reset_prefix_cache()
    full = prefill(llm, "continued-off", same_context)
    result["exact_logprob_error"] = max(abs(exact["logprobs"][token] - logprob)
                                        for token, logprob in full["logprobs"].items()
                                        if token in exact["logprobs"])
    # Session "t" saved last, so "s" and "m" (saved before) were dropped, here and in the worker.
    result["worker_sessions"] = sorted(worker.store)
    result["scheduler_sessions"] = sorted(connector.scheduler.saved)
    llm.reset_prefix_cache()
    before = connector.num_supplied_tokens
    prefill(llm, "after-drop", COMPACTED + [9], session="m")
    result["claimed_after_drop"] = connector.num_supplied_tokens - before
    result["exact_common_top"] = len(set(exact["logprobs"]) & set(full["logprobs"]))
    result["exact_same_greedy"] = (max(exact["logprobs"], key=exact["logprobs"].get)
                                   == max(full["logprobs"], key=full["logprobs"].get))
    result.update(contract_check(llm, connector))
    return result


def contract_check(llm, connector) -> dict:
    """vLLM may ask a waiting request again at every step, with a prefix hit that changes
    meanwhile, and may abort one mid-prefill."""
    from vllm import SamplingParams, TokensPrompt

    from arc_vllm.kv.claims import ViewInProgress, plan_claim
    from arc_vllm.kv.spans import claim_pieces, claimed_tokens, index_runs, warmup_boundaries

    engine, scheduler = llm.llm_engine, connector.scheduler
    calls: dict[str, list[int]] = {}  # request id -> the hit of each call
    saves: dict[str, list] = {}  # session -> what the worker was told to save for it
    plan_of, meta_of = scheduler.get_num_new_matched_tokens, scheduler.build_connector_meta

    def counted(request, num_computed_tokens):
        calls.setdefault(request.request_id, []).append(num_computed_tokens)
        return plan_of(request, num_computed_tokens)

    def recorded(*args):
        meta = meta_of(*args)
        for save in meta.saves:
            saves.setdefault(save.session, []).append(save)
        return meta

    scheduler.get_num_new_matched_tokens = counted
    scheduler.build_connector_meta = recorded
    result = {}
    # Waiting for blocks: a request outside any session holds most of the cache while the
    # session's next prompt (the last one's first 200 tokens, then new text) asks for its blocks.
    llm.reset_prefix_cache()
    prefill(llm, "w-last", LAST, session="w")
    continued = LAST[:200] + list(range(7000, 7300))
    engine.add_request("blocker", TokensPrompt(prompt_token_ids=list(range(8000, 8800))),
                       SamplingParams(max_tokens=60, ignore_eos=True))
    while not any(output.outputs[0].token_ids for output in engine.step()):
        pass  # until the blocker's 800-token prefill is done
    before = connector.num_supplied_tokens
    waited = prefill(llm, "w-continued", continued, session="w")
    claimed = connector.num_supplied_tokens - before
    hit = waited["cached"] - claimed  # what the prefix cache gave when it was finally scheduled
    [internal] = [key for key in calls if key.startswith("w-continued-")]
    # The plan: the saved prompt's own text from the hit on, claimed in place.
    result.update(waited_calls=len(calls[internal]), waited_claimed=claimed, waited_planned=200 - hit)
    # The hit shrinks while a request waits. Session "v" saves a compacted view (its run moved
    # from the warm-up's end on). A prompt without a session caches the next request's first
    # three blocks: two of the view's, then new text. The next request of "v" (those three
    # blocks, the view's head again, more text) waits behind a decoding blocker that grows into
    # the free blocks (9 of the 10: vLLM keeps one null block) and evicts the filler's partial
    # block, then its third; when the request is scheduled, its hit is two blocks.
    block = llm.llm_engine.vllm_config.cache_config.block_size
    llm.reset_prefix_cache()
    prefill(llm, "v-last", LAST, session="v")
    [warm] = warmup_boundaries(LAST, COMPACTED, block, 16)
    prefill(llm, "v-warm-up", COMPACTED[:warm], session="v", save=False)
    prefill(llm, "v-compacted", COMPACTED, session="v")
    saved = scheduler.saved["v"]
    llm.reset_prefix_cache()
    shrinking = COMPACTED[:2 * block] + list(range(7500, 7500 + block)) + HEAD + list(range(7700, 7700 + 272))
    prefill(llm, "v-filler", shrinking[:3 * block])
    engine.add_request("grower", TokensPrompt(prompt_token_ids=list(range(8000, 8000 + 5 * block))),
                       SamplingParams(max_tokens=250, ignore_eos=True))
    while not any(output.outputs[0].token_ids for output in engine.step()):
        pass
    before = connector.num_supplied_tokens
    shrunk = prefill(llm, "v-shrunk", shrinking, session="v")
    claimed = connector.num_supplied_tokens - before
    [internal] = [key for key in calls if key.startswith("v-shrunk-")]
    hit = shrunk["cached"] - claimed
    fresh = plan_claim(saved, shrinking, hit, 16).pieces
    carried = saves["v"][-1].carried
    result.update(shrunk_hits=calls[internal], shrunk_hit=hit, shrunk_claimed=claimed,
                  shrunk_planned=claimed_tokens(fresh),
                  shrunk_carried_fresh=carried == ViewInProgress(hit, fresh).carried(shrinking, saved),
                  shrunk_carried_head=carried[0][2] if carried and carried[0][:2] == (0, 0) else 0)
    # Aborted mid-prefill: the session's request is stopped after its first 256-token chunk.
    llm.reset_prefix_cache()
    prefill(llm, "a-last", LAST, session="a")
    before = connector.num_supplied_tokens
    engine.add_request("a-aborted", TokensPrompt(prompt_token_ids=COMPACTED),
                       SamplingParams(max_tokens=2, extra_args={"arc_session": "a"}))
    engine.step()
    [internal] = [key for key in engine.engine_core.engine_core.scheduler.requests if key.startswith("a-aborted-")]
    result["aborted_was_prefilling"] = engine.engine_core.engine_core.scheduler.requests[internal].num_computed_tokens < len(COMPACTED)
    engine.abort_request([internal], internal=True)
    while engine.has_unfinished_requests():
        engine.step()
    result["after_abort"] = {"views": "a" in scheduler.views, "tracked": len(scheduler.tracked)}
    result["aborted_claimed"] = connector.num_supplied_tokens - before
    llm.reset_prefix_cache()
    before = connector.num_supplied_tokens
    after = prefill(llm, "a-next", COMPACTED, session="a")
    claimed = connector.num_supplied_tokens - before
    hit = after["cached"] - claimed
    planned = claim_pieces(LAST, index_runs(LAST, 16), COMPACTED, hit, 16)
    result.update(next_claimed=claimed, next_planned=claimed_tokens(planned),
                  next_saved_is_last=True)
    scheduler.get_num_new_matched_tokens, scheduler.build_connector_meta = plan_of, meta_of
    return result


def wrong_layout_check(dtype: str) -> dict:
    """The connector made to write a layout the engine does not use: the start-up check must
    catch it, and the engine must serve what full recomputation serves."""
    from prometheus_client import REGISTRY
    from vllm.distributed.kv_transfer import get_kv_transfer_group
    from vllm.v1.attention.backends.cpu_attn import _get_attn_isa

    engine_isa = _get_attn_isa(getattr(torch, dtype), 128, 64)
    wrong = "vec" if engine_isa == "amx" else "amx"
    llm = make_engine(dtype, layout=wrong)
    connector = llm.llm_engine.engine_core.engine_core.scheduler.connector
    result = {"engine_isa": engine_isa, "forced": wrong, "enabled": connector.enabled,
              "checks": get_kv_transfer_group().worker.checks,
              "gauge": REGISTRY.get_sample_value("arc_kv_reuse_enabled")}
    prefill(llm, "last", LAST, session="s")
    before = connector.num_supplied_tokens
    served = prefill(llm, "compacted", COMPACTED, session="s")
    result["claimed"] = connector.num_supplied_tokens - before
    llm.reset_prefix_cache()
    prefill(llm, "last-off", LAST)
    recomputed = prefill(llm, "compacted-off", COMPACTED)
    served, recomputed = served["logprobs"], recomputed["logprobs"]
    result["same_greedy"] = max(served, key=served.get) == max(recomputed, key=recomputed.get)
    result["logprob_error"] = max(abs(served[token] - logprob) for token, logprob in recomputed.items()
                                  if token in served)
    return result


# The engines run in processes of their own (the session's in-process engine is left alone), two
# at a time (``engines_at_once``), each on one torch thread: one process's threads would otherwise spin at every step
# while the other's hold the cores. One process per dtype runs both of its engines, the right
# layout's and then the wrong one's (the first's connector shut down: vLLM keeps one per
# process), since starting a process costs more than either engine.
FP8_TEST = "test_a_layout_it_does_not_implement_refuses_kv_reuse_at_start"


def in_own_process(*argv: str) -> subprocess.CompletedProcess:
    from tests.helpers.processes import side_by_side  # here: this file also runs as a script

    return subprocess.run([sys.executable, __file__, *argv], capture_output=True, text=True, timeout=900,
                          env=side_by_side(VLLM_ENABLE_V1_MULTIPROCESSING="0"))


def result_of(done: subprocess.CompletedProcess) -> dict:
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def engine_runs(request):
    """Each dtype's engines, and the fp8 engine where its test is in the run (a run of some
    tests only, as ``tests/test_cpu_builds.py`` makes, does not start it)."""
    from concurrent.futures import ThreadPoolExecutor

    from tests.helpers.processes import engines_at_once

    runs = [("engines", dtype) for dtype in DTYPES]
    if any(item.name == FP8_TEST for item in request.session.items):
        runs.append(("fp8", "bfloat16"))
    with ThreadPoolExecutor(engines_at_once()) as pool:
        yield {run: pool.submit(in_own_process, *run) for run in runs}


@pytest.fixture(scope="module", params=DTYPES)
def check(request, engine_runs):
    result = result_of(engine_runs["engines", request.param].result())["check"]
    result["dtype"] = request.param
    return result


@pytest.mark.slow
def test_the_engine_chose_a_layout_the_connector_writes_and_the_start_check_passed(check):
    assert check["isas"] == [check["expected_isa"]] and check["expected_isa"] in check["known"]
    assert check["enabled"] and check["worker_checks"] == check["scheduler_checks"]
    [layout] = check["worker_checks"]
    assert layout["ok"] and layout["layout"] == layout["engine_layout"] == check["expected_isa"]
    assert layout["dtype"] == check["dtype"] and layout["value_equal"]


@pytest.mark.slow
@pytest.mark.parametrize("dtype", DTYPES)
def test_a_wrong_layout_is_caught_at_start_and_nothing_wrong_is_served(dtype, engine_runs):
    result = result_of(engine_runs["engines", dtype].result())["wrong-layout"]
    assert result["forced"] != result["engine_isa"]
    [layout] = result["checks"]
    assert not layout["ok"] and layout["key_error"] > 0.1
    assert result["enabled"] is False and result["gauge"] == 0
    assert result["claimed"] == 0 and result["same_greedy"]
    assert result["logprob_error"] < (1e-4 if dtype == "float32" else 5e-2)


@pytest.mark.slow
def test_claims_what_was_planned_and_the_engine_computes_only_the_rest(check):
    run_start = len(HEAD) + len(NEW)
    # The warm-up ends where the moved run starts ...
    assert check["warm"] == run_start
    # ... and the claim covers the run from there (the last prompt token is never claimed);
    # the warm-up's partial block came from the connector too, so all but the last token was.
    assert check["claimed"] == check["planned"] == len(COMPACTED) - 1 - check["warm"]
    assert check["cached"] == check["warm"] + check["claimed"] == len(COMPACTED) - 1
    assert check["claimed_without_session"] == 0


@pytest.mark.slow
def test_the_warm_up_stages_partial_block_is_supplied_as_computed(check):
    tolerance = TOLERANCE[check["dtype"]]
    assert check["warm"] % check["block_size"] > 0  # the stage ended inside a block
    for layer in (0, 1):
        assert check[f"tail_layer{layer}_key_error"] < tolerance
        assert check[f"tail_layer{layer}_value_error"] < tolerance


@pytest.mark.slow
def test_filled_layer0_kv_equals_full_recomputation_and_deeper_layers_do_not(check):
    tolerance = TOLERANCE[check["dtype"]]
    assert check["layer0_key_error"] < tolerance and check["layer0_value_error"] < tolerance
    # In bfloat16 rounding is of the same order as a random model's layer-1 context effect.
    assert check["layer1_key_error"] > max(check["layer0_key_error"], 1e-3)


@pytest.mark.slow
def test_kv_is_moved_at_most_max_moves_times_and_again_from_where_it_was_computed(check):
    # In the views saved for "s" and "m" the run was moved; for "u" it was computed.
    assert check["again_stage"] == check["again_run_start"]
    assert check["claimed_again_s"] == 0  # max_moves 1: moved once, then computed again
    assert check["claimed_again_u"] == check["claimed_again_m"] == check["again_claimable"] > 0
    # Moved twice (max_moves 2), its layer-0 K is as close to recomputation as KV moved once.
    tolerance = TOLERANCE[check["dtype"]]
    assert check["again_m_layer0_key_error"] < tolerance and check["again_u_layer0_key_error"] < tolerance


@pytest.mark.slow
def test_replay_figures_follow_the_engines_claims(check):
    """Replay's KV figures (``kv/claims.py`` ``ClaimReplay``) come from the connector's own
    rule: over the same prompts and stages, they claim what the engine's connector claimed."""
    from arc_vllm.kv.claims import ClaimReplay

    claims = ClaimReplay(block_size=check["block_size"])
    claims.next(LAST, 0)
    assert claims.next(COMPACTED, len(HEAD))["staged"] == check["claimed_with_stages"] > 0
    again = HEAD + list(range(6000, 6060)) + RUN + TAIL
    # The engine's prefix cache was emptied before this view: the hit was 0.
    assert claims.next(again, 0)["staged"] == check["claimed_again_s_with_stages"]


@pytest.mark.slow
def test_sessions_beyond_the_host_budget_are_dropped_on_both_sides(check):
    assert check["scheduler_sessions"] == check["worker_sessions"] == ["t"]
    assert check["claimed_after_drop"] == 0  # "m" has nothing saved any more


@pytest.mark.slow
def test_a_claim_that_keeps_its_context_is_exact(check):
    assert check["exact_claimed"] == 200 - check["block_size"]
    # Same greedy token, same logprobs (the random model's near-ties may reorder the tail of
    # its top 10, so the two top lists are compared where they overlap).
    assert check["exact_same_greedy"] and check["exact_common_top"] >= 8
    assert check["exact_logprob_error"] < (1e-4 if check["dtype"] == "float32" else 5e-2)


@pytest.mark.slow
def test_a_request_that_waits_for_blocks_claims_what_the_plan_says_once(check):
    assert check["waited_calls"] > 1  # asked again while it waited
    assert check["waited_claimed"] == check["waited_planned"]


@pytest.mark.slow
def test_a_request_whose_hit_shrinks_while_it_waits_claims_and_saves_as_a_fresh_plan(check):
    """vLLM asks the claim hook again at every step a request waits; the hit it is scheduled
    with decides the claim and what the saved view carries over from the last one, not the
    hit of the first call."""
    hits = check["shrunk_hits"]
    assert hits[0] == 3 * check["block_size"] and check["shrunk_hit"] == hits[-1] == 2 * check["block_size"]
    assert check["shrunk_claimed"] == check["shrunk_planned"]
    # What the save carries from the last view is that of a plan made at the final hit: the
    # two blocks that hold the last view's tokens, not the third (computed here, new text).
    assert check["shrunk_carried_fresh"] and check["shrunk_carried_head"] == 2 * check["block_size"]


@pytest.mark.slow
def test_an_abort_mid_prefill_leaves_nothing_and_the_next_request_claims_the_plan(check):
    assert check["aborted_was_prefilling"]
    assert check["after_abort"] == {"views": False, "tracked": 0}
    assert check["next_claimed"] == check["next_planned"] > 0


@pytest.mark.slow
def test_a_layout_it_does_not_implement_refuses_kv_reuse_at_start(engine_runs):
    # vLLM-CPU can keep an fp8 KV cache (AVX-512 or AMX); the connector cannot write it.
    done = engine_runs["fp8", "bfloat16"].result()
    if "FP8 KV cache on CPU requires" in done.stderr:
        pytest.skip("this CPU's vLLM keeps no fp8 KV cache (no AVX-512), so there is nothing to refuse")
    assert done.returncode != 0
    assert "--arc-kv-reuse does not support a quantised KV cache" in done.stderr
    assert "arc-tiny-llama" in done.stderr and "bfloat16" in done.stderr and "fp8" in done.stderr


if __name__ == "__main__":
    command, dtype = sys.argv[1], sys.argv[2]
    if command == "fp8":
        from vllm import LLM

        from arc_vllm.kv.config import KVReuseConfig

        LLM(model=str(prepare_tiny()), enforce_eager=True, max_model_len=1024, dtype=dtype,
            kv_cache_dtype="fp8", gpu_memory_utilization=0.1, kv_transfer_config=KVReuseConfig().transfer_config())
    else:  # "engines"
        from vllm.distributed.kv_transfer import ensure_kv_transfer_shutdown

        checked = engine_check(dtype)
        ensure_kv_transfer_shutdown()  # the next engine gets a connector of its own
        print(json.dumps({"check": checked, "wrong-layout": wrong_layout_check(dtype)}))
