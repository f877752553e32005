"""What the KV-reuse connector claims and where the server's warm-up ends (``kv/spans.py``),
as properties over random compactions: a view made of the last view's prefix, new text, runs of
the last view moved, and new text again, in tokens of the embedded model's tokenizer. The
connector's claim hook over the same compactions: it only plans (vLLM calls it repeatedly),
and a plan vLLM takes in part is claimed from its start. Warm-up stages end where runs start
(not on a block boundary): the next stage's claim starts with the stage's partial block, in
place, and only when its prompt goes on from the stage's.

    pytest tests/test_kv_claims.py
"""

from hypothesis import given
from hypothesis import strategies as st

from arc_vllm.kv.claims import ClaimReplay, SavedPrompt, StageTail, plan_claim
from arc_vllm.kv.config import KVReuseConfig
from arc_vllm.kv.spans import claim_pieces, claimed_tokens, index_runs, prefix_hit, warmup_boundaries
from arc_vllm.kv.warmup import WarmupPlanner

BLOCK, MIN_RUN = 16, 8
WORDS = ["status", "ok", "latency", "error", "line", "port", "needle", "ms", "file", "the", "§a1b2",
         "compaction", "catalog", "recall", "{", "}", "\n", "=", "42", "7", "ARC"]


@st.composite
def compaction(draw, smol, earlier=None):
    """(last view, compacted view) token ids: F kept, S new, moved runs of the last view, U new."""
    def text(low, high):
        return " ".join(draw(st.lists(st.sampled_from(WORDS), min_size=low, max_size=high)))

    earlier = earlier or smol.tokenizer(text(60, 400))["input_ids"]
    keep = draw(st.integers(0, len(earlier)))
    current = earlier[:keep] + smol.tokenizer(text(0, 40))["input_ids"]
    for _ in range(draw(st.integers(0, 3))):
        start = draw(st.integers(0, len(earlier) - 1))
        current += earlier[start:start + draw(st.integers(1, 200))]
        current += smol.tokenizer(text(0, 10))["input_ids"]
    return earlier, current + smol.tokenizer(text(1, 10))["input_ids"]


def common_block_prefix(earlier, current):
    same = 0
    while same < min(len(earlier), len(current)) and earlier[same] == current[same]:
        same += 1
    return same // BLOCK * BLOCK


def test_claims_are_end_to_end_copies_of_the_last_view(smol):
    @given(compaction(smol), st.integers(0, 40))
    def check(pair, recompute):
        earlier, current = pair
        hit = common_block_prefix(earlier, current)
        pieces = claim_pieces(earlier, index_runs(earlier, MIN_RUN), current, hit, MIN_RUN, recompute)
        if hit >= len(current) - 1:  # all cached (the engine never asks then): nothing to claim
            assert pieces == []
            return
        at = hit
        for new, old, length in pieces:
            assert new == at and length >= MIN_RUN
            assert current[new:new + length] == earlier[old:old + length]
            at += length
        assert at <= len(current) - 1  # the last prompt token is always computed
        if pieces and recompute:  # the run began at least `recompute` tokens before the hit
            _, old, _ = pieces[0]
            assert old >= recompute and current[hit - recompute:hit] == earlier[old - recompute:old]

    check()


def stage_claims(earlier, current, hit, boundaries, recompute):
    """Each stage's claim as the engine makes it: stage k's hit is stage k-1's last whole
    block, its claim starts with stage k-1's partial block (its tail) and goes on from stage
    k-1's end with pieces of the last view (``earlier``: its tokens, or a SavedPrompt with moves)."""
    saved = earlier if isinstance(earlier, SavedPrompt) else SavedPrompt(earlier, min_run=MIN_RUN)
    claims, tail, stage_hit = [], None, hit
    for end in [*boundaries, len(current)]:
        claims.append(plan_claim(saved, current[:end], stage_hit, MIN_RUN, recompute, tail))
        tail, stage_hit = StageTail.of_stage(current[:end], BLOCK), end // BLOCK * BLOCK
    return claims


def test_warm_up_stages_never_claim_less_and_each_stage_claims(smol):
    """Stages as the engine runs them: stage k's prompt is the view up to boundary k; the
    prefix cache gives it stage k-1's whole blocks, the connector the rest of stage k-1's
    prompt (in place) and then runs of the last view; the real request is the last stage."""
    @given(compaction(smol), st.sampled_from([0, 16]))
    def check(pair, recompute):
        earlier, current = pair
        hit = common_block_prefix(earlier, current)
        boundaries = warmup_boundaries(earlier, current, BLOCK, MIN_RUN, recompute, min_gain=BLOCK,
                                       max_stages=4)
        assert len(boundaries) <= 4
        assert all(hit < b < len(current) - 1 for b in boundaries)
        assert boundaries == sorted(set(boundaries))
        claims = stage_claims(earlier, current, hit, boundaries, recompute)
        for claim, start, end in zip(claims[1:], boundaries, [*boundaries[1:], len(current)]):
            # A stage's claim begins at the last one's last whole block and covers its tail.
            assert claim.tail == start - start // BLOCK * BLOCK
            at = start
            for new, old, length in claim.pieces:  # then end to end, copies of the last view
                assert new == at and current[new:new + length] == earlier[old:old + length]
                at += length
            assert at <= end - 1
        without = plan_claim(SavedPrompt(earlier, min_run=MIN_RUN), current, hit, MIN_RUN, recompute).tokens
        assert sum(claimed_tokens(claim.pieces) for claim in claims) >= without
        if recompute == 0:  # every boundary lies in a run the last view holds
            assert all(claim.pieces for claim in claims[1:])

    check()


def test_the_planner_stages_only_runs_the_connector_can_still_move(smol):
    """Over two compactions in a row, the server's planner (``WarmupPlanner``) knows which runs
    the last compaction moved: with max_moves 1 no stage it sends claims nothing. (Planned on
    every run of the last view, 21 of the sample's 59 stages claimed nothing: ``make replay``
    and tests/test_replay.py.)"""
    @given(st.data())
    def check(data):
        first, second = data.draw(compaction(smol))
        _, third = data.draw(compaction(smol, earlier=second))
        config = KVReuseConfig(min_run=MIN_RUN, max_moves=1, min_gain=BLOCK)
        planner = WarmupPlanner(BLOCK, config)
        replay = ClaimReplay(BLOCK, MIN_RUN, max_moves=1, min_gain=BLOCK)  # the connector's side
        for view in (first, second, third):
            hit = prefix_hit(replay.saved.tokens if replay.saved else None, view, BLOCK)
            saved = replay.saved
            stages = [stage.prompt for stage in planner.plan("s", view)]
            assert all(stage == view[:len(stage)] for stage in stages)
            if saved is None:  # a session's first view: nothing to claim, no stage
                assert stages == []
                replay.next(view, hit)
                continue
            claims = stage_claims(saved, view, hit, [len(stage) for stage in stages], 0)
            assert all(claim.pieces for claim in claims[1:])  # every stage sent claims something
            # ... and what they claim is what the connector's replay counts for the view.
            assert sum(claimed_tokens(claim.pieces) for claim in claims) == replay.next(view, hit)["staged"]

    check()


def test_a_stage_tail_is_claimed_only_by_a_prompt_that_goes_on_from_its_stage(smol):
    @given(compaction(smol), st.integers(1, BLOCK - 1), st.integers(0, 3))
    def check(pair, into_block, changed):
        _, current = pair
        end = len(current) // BLOCK * BLOCK - BLOCK + into_block  # a stage ending inside a block
        if end <= BLOCK:
            return
        tail = StageTail.of_stage(current[:end], BLOCK)
        assert tail.start == end - into_block
        assert tail.continues(current, tail.start) == into_block
        assert tail.continues(current, tail.start - BLOCK) == 0  # the hit must end at its start
        assert StageTail.of_stage(current[:tail.start], BLOCK) is None  # a whole block: no tail
        other = list(current)
        other[changed] += 1  # any token before differs: that KV saw other text
        assert tail.continues(other, tail.start) == 0
        assert tail.continues(current[:end], tail.start) == 0  # the last token is never claimed

    check()


def test_runs_behind_new_text_are_reached_through_warm_up_stages(smol):
    earlier = smol.tokenizer(" ".join(f"line {n}: status ok" for n in range(120)))["input_ids"]
    assert len(earlier) > 700
    new_text = smol.tokenizer("Summary: every line so far was ok. " * 5)["input_ids"]
    stub = smol.tokenizer("[§a1b2c3d4: cat log 7, 120 lines]")["input_ids"]
    current = earlier[:64] + new_text + earlier[300:500] + stub + earlier[550:700] + [42]
    index = index_runs(earlier, MIN_RUN)
    assert claim_pieces(earlier, index, current, 64, MIN_RUN) == []  # nothing right after the hit
    first_run = 64 + len(new_text)
    second_run = first_run + 200 + len(stub)
    first, second = warmup_boundaries(earlier, current, BLOCK, MIN_RUN, min_gain=BLOCK)
    # Each stage ends where the next run starts (a token sooner where the text before it
    # happens to end as the run's source does) ...
    assert first_run - 2 <= first <= first_run and second_run - 2 <= second <= second_run
    assert current[first:first_run] == earlier[300 - (first_run - first):300]
    # ... so the stage after it claims that run from there.
    assert claim_pieces(earlier, index, current, first, MIN_RUN)[0] == (first, 300 + first - first_run,
                                                                       first_run + 200 - first)
    assert claim_pieces(earlier, index, current, second, MIN_RUN)[0][0] == second
    assert warmup_boundaries(None, current, BLOCK, MIN_RUN) == []


def test_a_long_run_later_does_not_cost_the_runs_before_it(smol):
    """Each chain of runs is a stage of its own: a planner that took the largest claim first
    could not go back to the shorter run before it (stages run in order)."""
    earlier = smol.tokenizer(" ".join(f"line {n}: status ok" for n in range(120)))["input_ids"]
    new_text = smol.tokenizer("Summary: every line so far was ok. " * 5)["input_ids"]
    stub = smol.tokenizer("[§a1b2c3d4: cat log 7, 120 lines]")["input_ids"]
    current = earlier[:64] + new_text + earlier[300:400] + stub + earlier[450:750] + [42]
    index = index_runs(earlier, MIN_RUN)
    first_run = 64 + len(new_text)
    second_run = first_run + 100 + len(stub)
    boundaries = warmup_boundaries(earlier, current, BLOCK, MIN_RUN, min_gain=BLOCK)
    assert [run - boundary for run, boundary in zip([first_run, second_run], boundaries)] in \
        ([0, 0], [1, 0], [0, 1], [1, 1])  # where each run starts (or one token sooner, as above)
    claimed = [claimed_tokens(claim.pieces) for claim in stage_claims(earlier, current, 64, boundaries, 0)]
    assert claimed[1] >= 100 and claimed[2] >= 300 - 1
    assert not any(index.get(tuple(current[b - MIN_RUN:b])) for b in boundaries)  # new text before each
    # Under a stage limit, the larger claim is the one kept.
    assert warmup_boundaries(earlier, current, BLOCK, MIN_RUN, min_gain=BLOCK, max_stages=1) == boundaries[1:]


def test_the_claim_hook_only_plans_and_vllm_may_take_part_of_a_plan(smol):
    """vLLM may ask ``get_num_new_matched_tokens`` again and again for a waiting request, with
    any hit: every call returns the plan for that hit and leaves the scheduler as it was. When
    vLLM takes fewer tokens than planned, the claim is the plan's first ones, still contiguous."""
    import copy

    from vllm import SamplingParams
    from vllm.v1.request import Request

    from arc_vllm.kv.connector_scheduler import ArcKVScheduler

    from arc_vllm.kv.claims import ViewInProgress

    @given(compaction(smol), st.lists(st.integers(0, 400), min_size=1, max_size=5), st.integers(0, 300),
           st.integers(0, 400))
    def check(pair, hits, accepted, stage_end):
        last, current = pair
        scheduler = ArcKVScheduler(MIN_RUN, host_tokens=10_000, block_size=BLOCK)
        scheduler.enabled = True
        scheduler.saved["s"] = SavedPrompt(last, min_run=MIN_RUN)
        # A warm-up in progress, its last stage ending at ``stage_end`` (a partial block kept).
        tail = StageTail.of_stage(current[:stage_end], BLOCK)
        scheduler.views["s"] = ViewInProgress(0, tail=tail)
        request = Request("r", current, SamplingParams(extra_args={"arc_session": "s"}), None)
        before = copy.deepcopy({key: value for key, value in vars(scheduler).items() if key != "saved"})
        for hit in hits:
            hit = min(hit, len(current)) // BLOCK * BLOCK  # vLLM offers block-aligned hits
            plan = plan_claim(scheduler.saved["s"], current, hit, MIN_RUN, tail=tail)
            assert scheduler.get_num_new_matched_tokens(request, hit) == (plan.tokens, False)
            assert {key: value for key, value in vars(scheduler).items() if key != "saved"} == before
            if plan.tail:  # the stage's partial block first, from the hit, in place
                assert tail.start == hit and current[:len(tail.prompt)] == tail.prompt
            pieces, taken = plan.pieces, plan.taken(accepted)
            part = taken.pieces
            assert taken.tail == min(accepted, plan.tail)
            assert claimed_tokens(part) == min(max(accepted - plan.tail, 0), claimed_tokens(pieces))
            if part:
                assert part[:-1] == pieces[:len(part) - 1]  # whole pieces, then the last one cut
                (new, old, length), (plan_new, plan_old, plan_length) = part[-1], pieces[len(part) - 1]
                assert (new, old) == (plan_new, plan_old) and 0 < length <= plan_length
                starts = [hit + plan.tail] + [start + size for start, _, size in part[:-1]]
                assert [start for start, _, _ in part] == starts  # right after the hit, contiguous

    check()
