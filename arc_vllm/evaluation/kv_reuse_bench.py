"""``arc-vllm bench kv-reuse``: what ``--arc-kv-reuse`` saves on compaction turns, and what it costs in output.

Compaction turns come from real agent logs replayed through ARC (``replay/replay.py``; the
sample ``examples/trajectories.jsonl`` by default): each pair is the view before a compaction
and the compacted view, in the model's own tokens. On one in-process engine with ARC's KV
connector (``kv/connector.py``), for every pair and mode, from an empty prefix cache:

- ``off``: the previous view, then the compacted view (vLLM's prefix cache only);
- ``on`` (and ``on+rN``: each run's first N tokens recomputed; ``--recompute default,0``
  measures what ``--arc-kv-reuse`` serves with for the dtype, then reuse of all): the previous view under a
  session (the connector saves its KV), the warm-up stages (``kv/warmup.py``), then
  the compacted view (at each, the connector claims what it can and fills it with
  ``relocate_kv``).

Figures per mode, over the compaction turns: prefill tokens computed (warm-up stages
included), and
against ``off`` (full recomputation of the same view): greedy agreement (tokens of the first
32 generated before the first difference, / 32) and the mean KL(off || on) of the top-20
logprobs at the positions whose context is still identical (until and including the first
difference; on's missing tokens take its lowest top-20 logprob). Each pair starts from exact
KV; ``--chains`` replays whole trajectories too, every view in order, where reused KV stays in
the prefix cache for later turns and is moved again by the next compaction (the same figures,
at their compaction turns, beside the floor: the same views cut into the same chunks with
nothing reused, against off). Then the NIAH model agent (ARC, forced compactions) on the same
engine, with and without reuse.

The figures depend on the KV layout the engine chose (vLLM-CPU's attention ISA, which follows
the CPU and the dtype), so ``kv_reuse.json`` names it: ``machine`` holds the ISA (or GPU
backend), the dtype, the CPU's AVX2 / AVX-512 / AMX flags and the connector's start-up layout
check. If that check failed, reuse is off and the bench stops with an error rather than report
figures of a run that reused nothing.

Run:  arc-vllm bench kv-reuse --out runs/kv-reuse [--dtype bfloat16] [--recompute 0,64,256] [--diagnose]
Writes DIR/kv_reuse.json (and DIR/niah-off, DIR/niah-on) and prints a table.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import sys
import time
from pathlib import Path

from arc_vllm.evaluation import kv_reuse_diagnosis
from arc_vllm.kv.config import KVReuseConfig, default_recompute_tokens
from arc_vllm.kv.extra_args import ArcExtraArgs
from arc_vllm.kv.warmup import WarmupPlanner
from arc_vllm.replay.importers import read_all
from arc_vllm.replay.replay import apply_step, start_context
from arc_vllm.vllm_compat import cpu_build, cpu_flags, engine_connector, worker_connector

logger = logging.getLogger(__name__)

GENERATED = 32
TOP_LOGPROBS = 20


def replayed_views(paths: list[str], config, counter) -> list[dict]:
    """Every view ARC renders for each trajectory of ``paths``: (step, token ids, compacted)."""
    replayed = []
    for trajectory in read_all(paths).trajectories:
        try:
            context = start_context(trajectory, config, counter)
        except ValueError:  # a task prefix too large for the window: replay skips it too
            continue
        views = []
        for step in trajectory.steps:
            view = context.render()
            views.append((context.step + 1, counter.prompt_token_ids(view.messages), view.compacted))
            apply_step(context, step)
        replayed.append({"trajectory": trajectory.id, "views": views})
    return replayed


def compaction_pairs(replayed: list[dict], limit: int) -> list[dict]:
    """(view before, compacted view) pairs, at most ``limit``."""
    pairs = [{"trajectory": item["trajectory"], "step": step, "previous": before[1], "current": tokens}
             for item in replayed for before, (step, tokens, compacted) in zip(item["views"], item["views"][1:])
             if compacted]
    return pairs[:limit]


def agreement_and_kl(off, on) -> tuple[float, float]:
    """Greedy agreement over the first GENERATED tokens, and the mean top-20 KL (see above)."""
    same = 0
    while same < GENERATED and same < min(len(off.token_ids), len(on.token_ids)) \
            and off.token_ids[same] == on.token_ids[same]:
        same += 1
    divergences = []
    for position in range(min(same + 1, len(off.logprobs), len(on.logprobs))):
        reference = sorted(off.logprobs[position].items(), key=lambda item: -item[1].logprob)[:TOP_LOGPROBS]
        other = {token: entry.logprob for token, entry in on.logprobs[position].items()}
        floor = min(other.values())
        p = [math.exp(entry.logprob) for _, entry in reference]
        q = [math.exp(other.get(token, floor)) for token, _ in reference]
        p_total, q_total = sum(p), sum(q)
        divergences.append(sum(pi / p_total * math.log((pi / p_total) / (qi / q_total))
                               for pi, qi in zip(p, q) if pi > 0))
    return same / GENERATED, (sum(divergences) / len(divergences) if divergences else 0.0)


class SessionRunner:
    """A session's views through the in-process engine, with or without KV reuse."""

    def __init__(self, llm):
        self.llm = llm
        engine = llm.llm_engine
        self.block_size = engine.vllm_config.cache_config.block_size
        self.config = KVReuseConfig.of_vllm(engine.vllm_config)
        self.connector = engine_connector(llm)
        self.runs = 0

    def generate(self, tokens: list[int], extra_args: dict | None, full: bool = False):
        from vllm import SamplingParams, TokensPrompt

        params = SamplingParams(max_tokens=GENERATED if full else 1, temperature=0.0, ignore_eos=True,
                                logprobs=TOP_LOGPROBS if full else None, extra_args=extra_args or None)
        return self.llm.generate([TokensPrompt(prompt_token_ids=tokens)], params, use_tqdm=False)[0]

    def session(self, views: list[tuple[list[int], bool]], recompute: int | None,
                chunked: int | None = None) -> list[dict]:
        """One session's views in order (``measured``: generate GENERATED tokens with logprobs)
        from an empty prefix cache; ``recompute`` None: no reuse (off). With reuse, each view's
        warm-up stages go first, planned as the server plans them (``kv/warmup.py``). With
        ``chunked`` N (and no reuse), the stages reuse planned with N go first too, as
        requests outside any session: the same prefill chunks, every token computed."""
        self.llm.reset_prefix_cache()
        self.runs += 1
        reusing = recompute is not None
        session = f"bench-{self.runs}" if reusing or chunked is not None else None
        planner = WarmupPlanner(self.block_size, self.config, recompute if reusing else chunked or 0)
        extra = ArcExtraArgs(session=session if reusing else None, recompute_tokens=recompute or 0).to_dict()
        results = []
        for tokens, measured in views:
            before = self.connector.num_supplied_tokens
            stages = planner.warm_up([(session, tokens)], lambda batch: [
                self.generate(stage.prompt, stage.extra_args if reusing else None)
                for stage in batch]) if session else []
            output = self.generate(tokens, extra, full=measured)
            # num_cached_tokens counts the connector's tokens too: computed is what the engine ran.
            computed = sum(len(stage.prompt) - staged.num_cached_tokens for stage, staged in stages)
            computed += len(tokens) - output.num_cached_tokens
            results.append({"computed": computed, "stages": len(stages), "measured": measured,
                            "reused": self.connector.num_supplied_tokens - before, "output": output.outputs[0]})
        return results


def chained(runner: SessionRunner, replayed: list[dict], chains: int, recompute: int) -> dict:
    """Whole trajectories, every view in order, off and on: reused KV stays in the prefix cache
    for the turns after a compaction and is moved again by the next one, so errors can add up.
    And ``chunked``, the floor: the same views cut into the same prefill chunks, nothing
    reused, against off (the engine's own numerics over whole trajectories)."""
    picked = [item for item in replayed if sum(compacted for *_, compacted in item["views"]) >= 2][:chains]
    figures = {"trajectories": len(picked), "turns": 0, "compaction_turns": 0,
               "prefill_tokens_computed": {"off": 0, "on": 0},
               "compaction_prefill_tokens_computed": {"off": 0, "on": 0}, "agreement": [], "kl": []}
    floor = {"agreement": [], "kl": []}
    for item in picked:
        views = [(tokens, compacted) for _, tokens, compacted in item["views"]]
        off, on = runner.session(views, None), runner.session(views, recompute)
        chunks = runner.session(views, None, chunked=recompute)
        for reference, result in zip(off, chunks):
            if reference["measured"]:
                agreement, kl = agreement_and_kl(reference["output"], result["output"])
                floor["agreement"].append(agreement)
                floor["kl"].append(kl)
        figures["turns"] += len(views)
        for reference, result in zip(off, on):
            for mode, row in (("off", reference), ("on", result)):
                figures["prefill_tokens_computed"][mode] += row["computed"]
                if row["measured"]:
                    figures["compaction_prefill_tokens_computed"][mode] += row["computed"]
            if reference["measured"]:
                figures["compaction_turns"] += 1
                agreement, kl = agreement_and_kl(reference["output"], result["output"])
                figures["agreement"].append(agreement)
                figures["kl"].append(kl)
        logger.info("  chain %s: %d turns", item["trajectory"], len(views))
    agreements, divergences = figures.pop("agreement"), figures.pop("kl")
    figures["greedy_agreement"] = round(sum(agreements) / max(len(agreements), 1), 4)
    figures["mean_kl"] = round(sum(divergences) / max(len(divergences), 1), 5)
    figures["chunked"] = {"greedy_agreement": round(sum(floor["agreement"]) / max(len(floor["agreement"]), 1), 4),
                          "mean_kl": round(sum(floor["kl"]) / max(len(floor["kl"]), 1), 5)}
    return figures


def niah_accuracy(backend, out: Path, reuse: bool, tasks: int, max_calls: int, context_window: int,
                  counter) -> dict:
    from arc_vllm.evaluation.bench import Setting
    from arc_vllm.evaluation.niah_bench import run as run_niah

    backend.kv_reuse = reuse
    backend.warmup.forget()
    backend.llm.reset_prefix_cache()
    started = time.perf_counter()
    summary = run_niah(str(out), ["arc"], [42], tasks, counter, settings=[Setting()],
                       context_window=context_window, agent="model", backend=backend,
                       concurrency=8, max_calls=max_calls)
    arc = summary["methods"]["arc"]
    return {"accuracy": arc["accuracy"], "attempts": arc["attempts"], "passes": arc["passes"],
            "wall_s": round(time.perf_counter() - started, 1)}


def machine(llm) -> dict:
    """What the figures depend on: the KV layout the engine chose, the dtype, the CPU's flags and
    the vLLM-CPU build loaded (``_C``, ``_C_AVX512``, ``_C_AVX2``: the class it ran as, which may be
    less than the CPU's, ``scripts/cpu_build``), and the KV-reuse connector's start-up layout
    check (its worker runs in this process)."""
    config = llm.llm_engine.vllm_config
    layers = config.compilation_config.static_forward_context.values()
    isas = sorted({getattr(layer, "isa", None) or "gpu" for layer in layers if hasattr(layer, "kv_cache")})
    checks = worker_connector().checks
    return {"isa": ",".join(isas), "dtype": str(config.model_config.dtype).replace("torch.", ""),
            "cpu_flags": cpu_flags(), "vllm_build": cpu_build(), "kv_reuse_check": checks}


def force_attention_isa(isa: str) -> None:
    """Make this process's vLLM-CPU engine use the ``vec`` attention kernel where it would use
    ``amx`` (bfloat16 on an AMX machine), so that both kernels are measured on one machine.
    The rest of the model is untouched (its matmuls still use AMX through oneDNN); the
    connector reads the ISA the engine then chose, and its layout check runs as ever."""
    from vllm.v1.attention.backends import cpu_attn

    if isa != "vec":
        raise ValueError(f"--attention-isa {isa!r}: only vec can be forced (auto: the engine's choice)")
    chosen = cpu_attn._get_attn_isa

    def forced(dtype, block_size, head_size=None, kv_cache_dtype=None):
        picked = chosen(dtype, block_size, head_size, kv_cache_dtype)
        return "vec" if picked == "amx" else picked

    cpu_attn._get_attn_isa = forced


def start_engine(model: str | None, context_window: int, dtype: str, attention_isa: str = "auto",
                 max_moves: int | None = None, min_gain: int | None = None):
    """The in-process engine with ARC's connector (the runner reads the connector's own count
    of claimed tokens), and what the figures depend on; refuses a connector whose layout check
    failed (it would reuse nothing)."""
    from arc_vllm.agent.backends import VllmBackend

    if attention_isa != "auto":
        force_attention_isa(attention_isa)
    given = {"max_moves": max_moves, "min_gain": min_gain}
    config = KVReuseConfig(**{option: value for option, value in given.items() if value is not None})
    backend = VllmBackend(model, context_window=context_window, kv_reuse=True, dtype=dtype, kv_config=config)
    where = machine(backend.llm)
    logger.info("engine: attention %s, %s, CPU flags %s, vLLM build %s", where["isa"], where["dtype"],
                " ".join(where["cpu_flags"]), where["vllm_build"])
    if not all(check["ok"] for check in where["kv_reuse_check"]):
        backend.close()
        raise RuntimeError(f"KV reuse failed its start-up layout check, so it is off: {where['kv_reuse_check']}")
    return backend, where


def measure_pairs(runner: SessionRunner, pairs: list[dict], modes: dict) -> tuple[dict, dict, list]:
    """Every compaction pair, off and in every reuse mode, from exact KV: the prefill computed
    off, each mode's figures against off, and one row per pair."""
    totals = {mode: {"computed": 0, "stages": 0, "reused": 0, "agreement": [], "kl": []} for mode in modes}
    per_pair = []
    for index, pair in enumerate(pairs):
        views = [(pair["previous"], False), (pair["current"], True)]
        reference = runner.session(views, None)[-1]
        row = {"trajectory": pair["trajectory"], "step": pair["step"],
               "prompt_tokens": len(pair["current"]), "computed": {"off": reference["computed"]}}
        totals["off"]["computed"] += reference["computed"]
        for mode, tokens in modes.items():
            if tokens is None:
                continue
            result = runner.session(views, tokens)[-1]
            agreement, kl = agreement_and_kl(reference["output"], result["output"])
            for key in ("computed", "stages", "reused"):
                totals[mode][key] += result[key]
            totals[mode]["agreement"].append(agreement)
            totals[mode]["kl"].append(kl)
            row["computed"][mode] = result["computed"]
            row.setdefault("agreement", {})[mode] = agreement
            row.setdefault("kl", {})[mode] = round(kl, 5)
        per_pair.append(row)
        logger.info("  turn %d/%d: %s", index + 1, len(pairs), json.dumps(row["computed"]))
    variants = {mode: {"recompute_tokens": tokens,
                       "prefill_tokens_computed": totals[mode]["computed"],
                       "kv_reused_tokens": totals[mode]["reused"],
                       "warmup_stages": totals[mode]["stages"],
                       "greedy_agreement": round(sum(totals[mode]["agreement"]) / len(pairs), 4),
                       "mean_kl": round(sum(totals[mode]["kl"]) / len(pairs), 5)}
                for mode, tokens in modes.items() if tokens is not None}
    return totals["off"], variants, per_pair


def run(out: str, paths: list[str], model: str | None, context_window: int, max_tokens: int,
        pairs_limit: int, recompute: list[int], niah_tasks: int, niah_max_calls: int, chains: int = 2,
        dtype: str = "auto", attention_isa: str = "auto", diagnose: bool = False,
        max_moves: int | None = None, min_gain: int | None = None,
        recent_kept_percent: int | None = None) -> dict:
    from arc_vllm.core.config import ArcConfig
    from arc_vllm.core.tokens import load_counter

    started = time.perf_counter()
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    backend, where = start_engine(model, context_window, dtype, attention_isa, max_moves, min_gain)
    try:
        counter = load_counter(backend.model)
        kept = {} if recent_kept_percent is None else {"recent_kept_percent": recent_kept_percent}
        replayed = replayed_views(paths, ArcConfig.for_window(context_window, max_tokens, **kept), counter)
        pairs = compaction_pairs(replayed, pairs_limit)
        if not pairs:
            raise ValueError(f"no compaction turn in {', '.join(paths)} at --context-window {context_window}")
        logger.info("%d compaction turns, %d prompt tokens", len(pairs), sum(len(p["current"]) for p in pairs))
        runner = SessionRunner(backend.llm)
        # None: what --arc-kv-reuse serves with on this engine's dtype (kv/config.py).
        recompute = [default_recompute_tokens(where["dtype"]) if r is None else r for r in recompute]
        modes = {"off": None, **{("on" if r == 0 else f"on+r{r}"): r for r in recompute}}
        off, variants, per_pair = measure_pairs(runner, pairs, modes)
        first = next(iter(variants))
        chain = chained(runner, replayed, chains, variants[first]["recompute_tokens"]) if chains else {}
        diagnosis = kv_reuse_diagnosis.diagnose(
            backend.llm, pairs, runner.block_size, runner.config.min_run, GENERATED, TOP_LOGPROBS,
            agreement_and_kl) if diagnose else {}
        niah = {mode: niah_accuracy(backend, out_dir / f"niah-{mode}", mode == "on", niah_tasks,
                                    niah_max_calls, context_window, counter)
                for mode in ("off", "on")} if niah_tasks else {}
    finally:
        backend.close()
    result = {"model": backend.model, "machine": where, "context_window": context_window,
              "connector": KVReuseConfig.of_vllm(backend.llm.llm_engine.vllm_config).extra(),
              "compaction_turns": len(pairs),
              "compaction_prompt_tokens": sum(len(pair["current"]) for pair in pairs),
              "prefill_tokens_computed": {"off": off["computed"],
                                          "on": variants[first]["prefill_tokens_computed"]},
              "greedy_agreement": variants[first]["greedy_agreement"],
              "mean_kl": variants[first]["mean_kl"],
              "niah_accuracy": {mode: figures["accuracy"] for mode, figures in niah.items()},
              "niah": niah, "variants": variants, "chained": chain, "diagnosis": diagnosis, "turns": per_pair,
              "wall_s": round(time.perf_counter() - started, 1)}
    (out_dir / "kv_reuse.json").write_text(json.dumps(result, indent=1))
    return result


def table(result: dict) -> str:
    off = result["prefill_tokens_computed"]["off"]
    where = result["machine"]
    lines = [f"{result['compaction_turns']} compaction turns, {result['compaction_prompt_tokens']} prompt "
             f"tokens ({Path(result['model']).name}, window {result['context_window']}; attention "
             f"{where['isa']}, {where['dtype']}, CPU {' '.join(where['cpu_flags'])}, vLLM build "
             f"{where.get('vllm_build')})", "",
             "| mode | prefill computed | vs off | KV reused | warm-up stages | greedy agreement | mean KL |",
             "|---|---|---|---|---|---|---|",
             f"| off | {off} | 1.00 | 0 | 0 | 1.000 | 0 |"]
    for mode, figures in result["variants"].items():
        lines.append(f"| {mode} | {figures['prefill_tokens_computed']} | "
                     f"{figures['prefill_tokens_computed'] / max(off, 1):.2f} | {figures['kv_reused_tokens']} | "
                     f"{figures['warmup_stages']} | {figures['greedy_agreement']:.3f} | {figures['mean_kl']:.4f} |")
    chain = result["chained"]
    if chain:
        lines += ["", f"Chained ({chain['trajectories']} trajectories replayed whole, {chain['turns']} turns, "
                  f"{chain['compaction_turns']} compactions): prefill computed {chain['prefill_tokens_computed']['off']}"
                  f" off, {chain['prefill_tokens_computed']['on']} on (compaction turns "
                  f"{chain['compaction_prefill_tokens_computed']['off']} / "
                  f"{chain['compaction_prefill_tokens_computed']['on']}); at compaction turns greedy agreement "
                  f"{chain['greedy_agreement']:.3f}, mean KL {chain['mean_kl']:.4f}; the same views in the same "
                  f"chunks, nothing reused (the floor): {chain['chunked']['greedy_agreement']:.3f}, "
                  f"{chain['chunked']['mean_kl']:.4f}"]
    if result.get("diagnosis"):
        lines += ["", kv_reuse_diagnosis.table(result["diagnosis"])]
    if result["niah"]:
        lines += ["", "NIAH model agent (ARC): " + ", ".join(
            f"{mode} {figures['passes']}/{figures['attempts']} ({figures['accuracy']:.2f})"
            for mode, figures in result["niah"].items())]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="arc-vllm bench kv-reuse", description=__doc__.split("\n")[0])
    parser.add_argument("files", nargs="*", default=["examples/trajectories.jsonl"],
                        help="agent logs to take compaction turns from (any format replay reads)")
    parser.add_argument("--model", default=None, help="model folder (default: the embedded model)")
    parser.add_argument("--context-window", type=int, default=4096,
                        help="L_ctx of the replayed views and the engine's max_model_len (default 4096)")
    parser.add_argument("--max-tokens", type=int, default=512, help="G_max of the replayed ARC context")
    parser.add_argument("--recent-kept-percent", type=int, default=None,
                        help="how much of H's cap the replayed ARC context keeps through a compaction "
                             "(default ARC's, 50; more moves more KV: --arc-recent-kept-percent)")
    parser.add_argument("--turns", type=int, default=16, help="compaction turns measured (default 16)")
    parser.add_argument("--recompute", default="default,0",
                        help="comma-separated N: modes reusing KV with each run's first N tokens "
                             "recomputed; 'default' is what --arc-kv-reuse serves with for the "
                             "engine's dtype (default: default,0; the first is the headline and "
                             "the chained figure's)")
    parser.add_argument("--chains", type=int, default=2,
                        help="trajectories (with two compactions or more) replayed whole, every "
                             "view in order, off and on (default 2; 0: skip)")
    parser.add_argument("--niah-tasks", type=int, default=8, help="NIAH episodes per mode (0: skip)")
    parser.add_argument("--niah-max-calls", type=int, default=30, help="agent calls per NIAH episode")
    parser.add_argument("--dtype", default="auto",
                        help="the engine's dtype (auto, float32, bfloat16): on vLLM-CPU it picks the "
                             "attention ISA and so the KV layout (bfloat16 on AMX: amx)")
    parser.add_argument("--attention-isa", default="auto", choices=["auto", "vec"],
                        help="vLLM-CPU's attention kernel: auto (the engine's choice) or vec (forced "
                             "where the engine would take amx, to compare the two on one machine)")
    parser.add_argument("--diagnose", action="store_true",
                        help="also read the reused and the recomputed KV back from the cache and say "
                             "where the quality goes (kv_reuse_diagnosis.py)")
    parser.add_argument("--max-moves", type=int, default=None,
                        help="the connector's max_moves: compactions in a row that may move a token's KV "
                             "(default: the connector's, 1); it changes the chained figures only, since "
                             "each pair starts from computed KV")
    parser.add_argument("--min-gain", type=int, default=None,
                        help="the connector's min_gain: the least claim a warm-up stage is sent for "
                             "(default: the connector's, 128)")
    parser.add_argument("--out", default="runs/kv-reuse", help="output folder (default runs/kv-reuse)")
    args = parser.parse_args(argv)
    missing = [path for path in args.files if not Path(path).exists()]
    if missing:
        parser.error(f"no such file: {', '.join(missing)}")
    try:
        recompute = [None if part.strip() == "default" else int(part)
                     for part in args.recompute.split(",") if part.strip()]
    except ValueError:
        parser.error(f"--recompute {args.recompute!r}: expected comma-separated integers such as 0,32 "
                     "(or 'default')")
    if not recompute or min((r for r in recompute if r is not None), default=0) < 0:
        parser.error("--recompute: at least one N >= 0")
    recompute = list(dict.fromkeys(recompute))
    for option in ("max_moves", "min_gain"):
        if getattr(args, option) is not None and getattr(args, option) < 0:
            parser.error(f"--{option.replace('_', '-')} {getattr(args, option)}: expected 0 or more")
    if args.recent_kept_percent is not None and not 10 <= args.recent_kept_percent <= 100:
        parser.error(f"--recent-kept-percent {args.recent_kept_percent}: expected 10 to 100")
    try:
        result = run(args.out, args.files, args.model, args.context_window, args.max_tokens, args.turns,
                     recompute, args.niah_tasks, args.niah_max_calls, args.chains, dtype=args.dtype,
                     attention_isa=args.attention_isa, diagnose=args.diagnose, max_moves=args.max_moves,
                     min_gain=args.min_gain, recent_kept_percent=args.recent_kept_percent)
    except ValueError as error:
        parser.error(str(error))
    except RuntimeError as error:
        print(f"arc-vllm bench kv-reuse: {error}", file=sys.stderr)
        return 1
    print(table(result))
    print(f"wrote {Path(args.out) / 'kv_reuse.json'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    from arc_vllm.console import show_progress
    from arc_vllm.offline import go_offline, in_process_engine

    go_offline()
    in_process_engine()
    show_progress()
    sys.exit(main())
