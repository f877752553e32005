"""The ``arc-vllm`` command.

    arc-vllm replay FILE|DIR ... [--format F] [--context-window N] [--max-tokens N] [--tokenizer T] --out DIR
    arc-vllm serve [MODEL] [--arc-...] [vllm serve options]   vLLM with ARC sessions
    arc-vllm bench niah [--methods ...] [--seeds ...] [--tasks N] [--agent scripted|model] --out DIR
    arc-vllm bench longbench --data data.json --backend vllm|openai [...] --out DIR
    arc-vllm bench kv-reuse [LOGS] [--turns N] [--recompute 0,32] --out DIR
                                what --arc-kv-reuse saves on compaction turns, and its cost
    arc-vllm report DIR         summary.json, tables.md, accuracy.png from DIR/results.jsonl
    arc-vllm cost DIR           roofline tables (cost.json, cost.md, hbm_*.png)
    arc-vllm profile [--engine vllm|torch] [--model M] [--trace results.jsonl] --out DIR
                                the roofline checked against the engine on this machine
    arc-vllm prepare-model      convert the embedded default model once (set-up does this)
    arc-vllm store copy SRC DST [--session ID ...]
                                move sessions between stores (a folder, redis://...), exactly

Run ``arc-vllm --help`` or ``arc-vllm replay --help``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from arc_vllm.console import show_progress
from arc_vllm.policies import PAPER_METHODS, POLICIES
from arc_vllm.replay.importers import FORMATS

METHODS = ("arc",) + tuple(method for method in POLICIES if method != "arc")  # ARC first
# The shipped sample, when run from a checkout (an installed package has no examples/).
SAMPLE = "examples/trajectories.jsonl"


def _environment(argv: list[str]) -> None:
    """Where this process starts: offline always; an in-process engine for the commands that
    run one (``serve`` runs vLLM's own engine processes)."""
    from arc_vllm.offline import go_offline, in_process_engine

    go_offline()  # nothing here may reach beyond loopback
    if argv[:1] in (["bench"], ["profile"]):
        in_process_engine()


def _add_budget_options(parser: argparse.ArgumentParser) -> None:
    from arc_vllm.core.config import DEFAULT_MAX_TOKENS, ArcConfig

    parser.add_argument("--context-window", type=int, default=4096,
                        help="L_ctx: the serving model's context window in tokens (default 4096)")
    for name, help_text in ArcConfig.options().items():  # the same table as serve's --arc-NAME
        parser.add_argument(f"--{name.replace('_', '-')}", type=int,
                            default=DEFAULT_MAX_TOKENS if name == "max_tokens" else None, help=help_text)


def _report(out: str, timelines: str, summary: dict, methods: list[dict] | None) -> None:
    from arc_vllm.inspector.report import load_timelines, write_report

    path = write_report(out, load_timelines(timelines), summary, methods)
    print(f"wrote {path}", file=sys.stderr)


def _config(args):
    from arc_vllm.core.config import ArcConfig

    return ArcConfig.for_window(args.context_window, args.max_tokens, **_overrides(args))


def _overrides(args) -> dict:
    """The ArcConfig budgets named on the command line (``ArcConfig.options``), G_max aside."""
    from arc_vllm.core.config import ArcConfig

    return {name: getattr(args, name) for name in ArcConfig.options()
            if name != "max_tokens" and getattr(args, name, None) is not None}


def _recall_pair(text: str) -> tuple[int, int]:
    """16k/8k -> (16000, 8000): recall_budget_chars / recall_max_chars."""
    def chars(part: str) -> int:
        part = part.strip().lower()
        return int(float(part[:-1]) * 1000) if part.endswith("k") else int(part)
    try:
        budget, largest = text.split("/")
        return chars(budget), chars(largest)
    except ValueError:
        raise ValueError(f"--recall-budget {text!r}: expected BUDGET/MAX such as 16k/8k") from None


def _settings(args) -> list:
    from arc_vllm.evaluation.bench import Setting

    schedules = [() if text == "none" else tuple(int(call) for call in text.split(",") if call)
                 for text in args.force]
    if args.recall_budget:
        budgets = [_recall_pair(text) for text in args.recall_budget]
    else:
        from arc_vllm.core.config import ArcConfig

        budgets = [(args.recall_budget_chars or ArcConfig.default_of("recall_budget_chars"),
                    args.recall_max_chars or ArcConfig.default_of("recall_max_chars"))]
    noises = getattr(args, "noise_lines", [None])
    position = getattr(args, "needle_position", "first")
    return [Setting(force=schedule, noise_lines=noise, recall_budget_chars=budget, recall_max_chars=largest,
                    needle_position=position)
            for schedule in schedules for noise in noises for budget, largest in budgets]


def _bench(parser, args, argv: list[str]) -> int:
    from arc_vllm.evaluation.bench import check_methods
    from arc_vllm.core.tokens import load_counter

    if args.ray == "local" and args.backend == "openai":
        parser.error("--ray without an ADDRESS runs Ray in a network namespace with loopback only, "
                     "where --base-url cannot be reached: give the cluster's ADDRESS (--ray HEAD:6379) "
                     "or run without --ray")
    if args.ray == "local":
        from arc_vllm.ray_cluster import run_isolated

        code = run_isolated(argv)  # the whole run, in a namespace with loopback only
        if code is not None:
            return code

    methods = [method for method in args.methods.split(",") if method]
    try:
        check_methods(methods, args.backend, model_agent=args.bench == "longbench"
                      or getattr(args, "agent", "") == "model")
        settings = _settings(args)
        seeds = [int(seed) for seed in args.seeds.split(",") if seed]
        # Every budget named on the command line (the recall characters are the settings').
        overrides = {name: value for name, value in _overrides(args).items()
                     if name not in ("recall_budget_chars", "recall_max_chars")}
        _config(args)  # validate the budgets before anything starts
    except ValueError as error:
        parser.error(str(error))
    from arc_vllm.agent.backends import make_backend

    backend = make_backend(args.backend, base_url=args.base_url, model=args.model,
                           context_window=args.context_window) if args.backend else None
    concurrency = args.concurrency or (8 if backend else 1)
    counter = load_counter(args.tokenizer or (args.model if args.backend == "vllm" else None))
    common = dict(settings=settings, context_window=args.context_window, max_tokens=args.max_tokens,
                  overrides=overrides, backend=backend, concurrency=concurrency,
                  agent_max_tokens=args.agent_max_tokens, max_calls=args.max_calls,
                  ray_address=args.ray)
    try:
        if args.bench == "niah":
            from arc_vllm.evaluation.niah_bench import run as run_niah

            summary = run_niah(args.out, methods, seeds, args.tasks, counter, agent=args.agent, **common)
        else:
            from arc_vllm.evaluation.longbench_bench import run as run_longbench

            summary = run_longbench(args.out, args.data, methods, seeds, args.tasks, counter,
                                    page_chars=args.page_chars, subset=args.subset, **common)
    except ValueError as error:
        parser.error(str(error))
    finally:
        if backend is not None:
            backend.close()
    from arc_vllm.reports.summary import tables

    print(tables(summary))
    return 0


# -- one parser and one handler per subcommand (vLLM's CLISubcommand shape) -----------------

def _replay_parser(commands) -> argparse.ArgumentParser:
    replay = commands.add_parser("replay", help="replay recorded trajectories through ARC")
    replay.add_argument("files", nargs="*", default=[SAMPLE],
                        help="agent logs: files or folders, format detected by content (SWE-agent "
                             ".traj, mini-swe-agent .traj.json, OpenHands output.jsonl, tau-bench "
                             f"results, ARC JSONL; default: {SAMPLE} in a checkout)")
    replay.add_argument("--format", default=None, choices=FORMATS,
                        help="read every file as this format instead of detecting it")
    replay.add_argument("--methods", default=None,
                        help="comma-separated context policies to compare on the same logs (e.g. "
                             "arc,swe_agent_last_n,openhands_masking,openhands_window,sliding_window,"
                             "full_context): writes DIR/<method>/summary.json and DIR/summary.md")
    replay.add_argument("--tokenizer", default=None,
                        help="HF tokenizer name or folder, or o200k_base / cl100k_base "
                             "(default: the embedded model's)")
    replay.add_argument("--out", default="runs/replay", help="output folder (default runs/replay)")
    replay.add_argument("--html", action="store_true",
                        help="also write DIR/report.html: each trajectory's timeline and, with "
                             "--methods, the methods side by side (one file, opens offline)")
    _add_budget_options(replay)
    return replay


def _replay(parser, args, argv: list[str]) -> int:
    from arc_vllm.replay.replay import run

    missing = [path for path in args.files if not os.path.exists(path)]
    if missing:
        parser.error(f"no such file: {', '.join(map(str, missing))}")
    try:
        config = _config(args)
    except ValueError as error:
        parser.error(str(error))
    if args.methods:
        from arc_vllm.replay.replay_methods import run as run_methods
        from arc_vllm.replay.replay_methods import table

        try:
            summaries = run_methods(args.files, args.out, config, args.tokenizer,
                                    [m for m in args.methods.split(",") if m], format=args.format)
        except ValueError as error:
            parser.error(str(error))
        print(table(summaries))
        print(f"wrote {os.path.join(args.out, 'summary.md')}", file=sys.stderr)
        if args.html:  # the timelines come from ARC's own replay, beside the methods
            timelines = os.path.join(args.out, "arc-timelines")
            summary = run(args.files, timelines, config, args.tokenizer, format=args.format)
            _report(args.out, timelines, summary, summaries)
        return 0
    summary = run(args.files, args.out, config, args.tokenizer, format=args.format)
    if args.html:
        _report(args.out, args.out, summary, None)
    shown = {key: value for key, value in summary.items() if key not in ("config",)}
    print(json.dumps(shown, indent=1))
    uncached = summary["uncached_prefill_tokens"]
    print(f"uncached prefill: {uncached['without_kv_reuse']:,} tokens without KV reuse "
          f"({uncached['without_kv_reuse_vs_floor']}x the floor of {uncached['floor']:,}), "
          f"{uncached['with_kv_reuse']:,} with it ({uncached['with_kv_reuse_vs_floor']}x); "
          f"{summary['compactions']} compactions ({summary['compactions_per_100_steps']} per 100 steps)")
    print(f"wrote {os.path.join(args.out, 'summary.json')}", file=sys.stderr)
    return 0 if summary["over_budget_calls"] == 0 and summary["exactly_recoverable"] == \
        summary["observations"] else 1


def _bench_parser(commands) -> argparse.ArgumentParser:
    bench = commands.add_parser("bench", help="the paper's benchmarks: niah, longbench; and kv-reuse")
    bench_kinds = bench.add_subparsers(dest="bench", required=True)
    niah = bench_kinds.add_parser("niah", help="Needle-in-a-Haystack (scripted or model agent)")
    niah.add_argument("--agent", default="scripted", choices=["scripted", "model"],
                      help="scripted: the mechanism alone; model: the backend's model acts")
    niah.add_argument("--noise-lines", type=int, nargs="+", default=[25], choices=[5, 10, 25, 30],
                      help="noise lines on each side of the needle; several values: a sweep")
    niah.add_argument("--needle-position", default="first", choices=["first", "random"],
                      help="first (the paper: read early, must survive every compaction) or random "
                           "(a seeded place in the reading order)")
    bench_kinds.add_parser("kv-reuse", add_help=False, help="what --arc-kv-reuse saves on compaction "
                           "turns and costs in output (kv_reuse.json; see kv-reuse --help)")
    longbench_parser = bench_kinds.add_parser("longbench", help="LongBench-v2 hard subset (model agent)")
    longbench_parser.add_argument("--data", required=True, help="LongBench-v2 data.json (or JSON Lines)")
    longbench_parser.add_argument("--subset", default="hard", choices=["hard", "all"])
    longbench_parser.add_argument("--page-chars", type=int, default=3000, help="characters per page")
    for kind, default_methods, default_tasks in ((niah, "arc,sliding_window,full_context", 20),
                                                 (longbench_parser, ",".join(PAPER_METHODS), None)):
        kind.add_argument("--methods", default=default_methods,
                          help=f"comma-separated context policies (of {', '.join(METHODS)})")
        kind.add_argument("--seeds", default="42,82,122")
        kind.add_argument("--tasks", type=int, default=default_tasks, help="tasks per seed")
        kind.add_argument("--force", nargs="+", default=["5,10,15"],
                          help="forced-compaction call indices, e.g. 5,10,15 (paper default), 5, "
                               "3,6,9,12,15, none; several schedules: a sweep")
        kind.add_argument("--recall-budget", nargs="+", default=None,
                          help="RECALL_BUDGET_CHARS/RECALL_MAX_CHARS pairs such as 16k/8k; several: a sweep")
        kind.add_argument("--backend", default=None, choices=["vllm", "openai"],
                          help="model for --agent model, llm_summary and structured_state: vllm (in-"
                               "process engine) or openai (an endpoint at --base-url)")
        kind.add_argument("--base-url", default=None, help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1")
        kind.add_argument("--model", default=None, help="model folder or served name (default: the embedded model)")
        kind.add_argument("--concurrency", type=int, default=None,
                          help="episodes run at once, so the engine batches them (default 8 with a backend, else 1)")
        kind.add_argument("--agent-max-tokens", type=int, default=128, help="tokens per agent reply")
        kind.add_argument("--max-calls", type=int, default=60 if kind is niah else None,
                          help="agent calls per episode before it counts as no answer (default: "
                               "NIAH 60, LongBench every page of the document + 20)")
        kind.add_argument("--tokenizer", default=None, help="default: --model's, else the embedded model's")
        kind.add_argument("--ray", nargs="?", const="local", default=None, metavar="ADDRESS",
                          help="run each attempt as a Ray task: alone, on a local cluster in a "
                               "loopback-only network namespace; with ADDRESS, on that cluster")
        kind.add_argument("--out", default=f"runs/{'niah' if kind is niah else 'longbench'}")
        _add_budget_options(kind)
    return bench


def _report_parser(commands) -> argparse.ArgumentParser:
    report_command = commands.add_parser("report", help="summary.json and tables from DIR/results.jsonl")
    report_command.add_argument("directory")
    return report_command


def _report_command(parser, args, argv: list[str]) -> int:
    from arc_vllm.reports.summary import report, tables

    if not os.path.exists(os.path.join(args.directory, "results.jsonl")):
        parser.error(f"no results.jsonl in {args.directory}")
    print(tables(report(args.directory)))
    return 0


def _cost_parser(commands) -> argparse.ArgumentParser:
    cost = commands.add_parser("cost", help="roofline tables (HBM traffic, time per success) from DIR/results.jsonl")
    cost.add_argument("directory")
    cost.add_argument("--hardware", default="H200,MI300X", help="comma-separated, from cost/specs.json")
    cost.add_argument("--model", default="Qwen3-8B", help="model specs to project onto (cost/specs.json)")
    cost.add_argument("--baseline", default="sliding_window", help="method for savings and speedup")
    cost.add_argument("--scratch-gb", type=float, default=0.0, help="HBM set aside for activations")
    cost.add_argument("--agent-generated-tokens", type=int, default=None,
                      help="take every agent call to generate N tokens (what-if: the scripted agent "
                           "writes only its action; a model writes its reasoning too)")
    return cost


def _cost(parser, args, argv: list[str]) -> int:
    from arc_vllm.cost.report import cost_report, markdown

    if not os.path.exists(os.path.join(args.directory, "results.jsonl")):
        parser.error(f"no results.jsonl in {args.directory}")
    try:
        tables = cost_report(args.directory, [h for h in args.hardware.split(",") if h], args.model,
                             args.baseline, args.scratch_gb, args.agent_generated_tokens)
    except ValueError as error:
        parser.error(str(error))
    print(markdown(tables))
    return 0


def _prepare_model_parser(commands) -> argparse.ArgumentParser:
    return commands.add_parser("prepare-model", help="prepare the embedded default model")


def _prepare_model(parser, args, argv: list[str]) -> int:
    from arc_vllm.model_prep import prepare

    print(prepare())
    return 0


def _store_parser(commands) -> argparse.ArgumentParser:
    store = commands.add_parser("store", help="the session store: copy sessions between a folder and Redis")
    actions = store.add_subparsers(dest="action", required=True)
    copy = actions.add_parser("copy", help="copy sessions exactly from SRC to DST (a folder, or "
                              "redis://HOST:PORT/DB, rediss://, unix://); the views they give are the same")
    copy.add_argument("source", metavar="SRC")
    copy.add_argument("target", metavar="DST")
    copy.add_argument("--session", action="append", default=None, metavar="ID",
                      help="only this session (repeat for more; default: every stored session)")
    return store


def _store(parser, args, argv: list[str]) -> int:
    import asyncio

    from arc_vllm.core.store_log import StoreLockedError
    from arc_vllm.serving.errors import SessionError
    from arc_vllm.serving.sessions.store_copy import copy_sessions

    try:
        copied = asyncio.run(copy_sessions(args.source, args.target, args.session))
    except (ValueError, SessionError, StoreLockedError) as error:
        print(f"arc-vllm store copy: {error}", file=sys.stderr)
        return 1
    print(f"copied {len(copied)} session(s) from {args.source} to {args.target}")
    return 0


def _serve(argv: list[str]) -> int:
    """Everything after ``serve`` belongs to vLLM's parser (and ARC's --arc-* options)."""
    from arc_vllm.serving.serve_arguments import given

    if given(argv, "--ray-replicas"):  # N engine replicas behind one front
        from arc_vllm.serving.ray.front import main as ray_main

        return ray_main(argv)
    from arc_vllm.serving.launcher import main as serve_main

    return serve_main(argv)


def _kv_reuse(argv: list[str]) -> int:
    from arc_vllm.evaluation.kv_reuse_bench import main as kv_reuse_main

    return kv_reuse_main(argv)


def _profile(argv: list[str]) -> int:
    from arc_vllm.cost.profile import main as profile_main

    return profile_main(argv)


# Parsed here: (add its parser, run it). Its own parser: (the words that name it, run it), listed
# in --help by a placeholder parser without its options.
SUBCOMMANDS = ((_replay_parser, _replay), (_bench_parser, _bench), (_report_parser, _report_command),
               (_cost_parser, _cost), (_prepare_model_parser, _prepare_model), (_store_parser, _store))
OWN_PARSERS = ((("serve",), _serve), (("bench", "kv-reuse"), _kv_reuse), (("profile",), _profile))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="arc-vllm", description="Addressable Recall Compaction "
                                     "for long-running LLM agents, on vLLM.")
    commands = parser.add_subparsers(dest="command", required=True)
    for add_parser, handler in SUBCOMMANDS:
        add_parser(commands).set_defaults(handler=handler)
    commands.add_parser("profile", add_help=False, help="measure the engine beside the roofline "
                        "(profile.json, profile.md, decode.png; see profile --help)")
    commands.add_parser("serve", help="vLLM's OpenAI server with ARC sessions "
                        "(arc-vllm serve [MODEL] [--arc-...] [vllm options]; see serve --help)",
                        add_help=False)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    _environment(argv)
    if argv[:1] != ["serve"]:
        show_progress()
    for words, handler in OWN_PARSERS:
        if argv[:len(words)] == list(words):
            return handler(argv[len(words):])
    parser = build_parser()
    args = parser.parse_args(argv)
    return args.handler(parser, args, argv)


if __name__ == "__main__":
    sys.exit(main())
