"""The ``arc-vllm`` command.

    arc-vllm replay FILE.jsonl [--context-window N] [--max-tokens N] [--tokenizer T] --out DIR
    arc-vllm serve [MODEL] [--arc-...] [vllm serve options]   vLLM with ARC sessions
    arc-vllm bench niah [--methods ...] [--seeds ...] [--tasks N] --out DIR   scripted NIAH
    arc-vllm report DIR         summary.json and tables.md from DIR/results.jsonl
    arc-vllm prepare-model      convert the embedded default model once (set-up does this)

Run ``arc-vllm --help`` or ``arc-vllm replay --help``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

DEFAULT_SAMPLE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                              "examples", "trajectories.jsonl")


def _offline() -> None:
    # Nothing here may reach beyond loopback; these switch off the hub and usage reports.
    for key, value in (("HF_HUB_OFFLINE", "1"), ("VLLM_NO_USAGE_STATS", "1"), ("DO_NOT_TRACK", "1"),
                       ("TOKENIZERS_PARALLELISM", "false")):
        os.environ.setdefault(key, value)


def _add_budget_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--context-window", type=int, default=4096,
                        help="L_ctx: the serving model's context window in tokens (default 4096)")
    parser.add_argument("--max-tokens", type=int, default=512,
                        help="G_max: tokens reserved for the completion (default 512)")
    parser.add_argument("--recall-chunk-tokens", type=int, help="q: tokens per recall chunk")
    parser.add_argument("--recent-turns", type=int, help="turns kept verbatim after a compaction")
    parser.add_argument("--recall-budget-chars", type=int,
                        help="total characters of recalled text in the view (default 16000)")
    parser.add_argument("--recall-max-chars", type=int,
                        help="characters per recall (default 8000)")


def _config(args):
    from arc_vllm.core.config import ArcConfig

    overrides = {name: getattr(args, name) for name in
                 ("recall_chunk_tokens", "recent_turns", "recall_budget_chars", "recall_max_chars")
                 if getattr(args, name) is not None}
    return ArcConfig.for_window(args.context_window, args.max_tokens, **overrides)


def main(argv: list[str] | None = None) -> int:
    _offline()
    parser = argparse.ArgumentParser(prog="arc-vllm", description="Addressable Recall Compaction "
                                     "for long-running LLM agents, on vLLM.")
    commands = parser.add_subparsers(dest="command", required=True)
    replay = commands.add_parser("replay", help="replay recorded trajectories through ARC")
    replay.add_argument("file", nargs="?", default=DEFAULT_SAMPLE,
                        help="trajectories, one JSON object per line (default: the shipped sample)")
    replay.add_argument("--method", default="arc", choices=["arc"],
                        help="context policy (the baselines arrive with the benchmarks)")
    replay.add_argument("--tokenizer", default=None,
                        help="HF tokenizer name or folder, or o200k_base / cl100k_base "
                             "(default: the embedded model's)")
    replay.add_argument("--out", default="runs/replay", help="output folder (default runs/replay)")
    _add_budget_options(replay)
    bench = commands.add_parser("bench", help="benchmarks (so far: niah, scripted agent)")
    bench_kinds = bench.add_subparsers(dest="bench", required=True)
    niah = bench_kinds.add_parser("niah", help="Needle-in-a-Haystack with the scripted agent")
    niah.add_argument("--methods", default="arc,sliding_window,full_context",
                      help="comma-separated context policies")
    niah.add_argument("--seeds", default="42,82,122")
    niah.add_argument("--tasks", type=int, default=20, help="tasks per seed")
    niah.add_argument("--force", default="5,10,15", help="forced-compaction call indices")
    niah.add_argument("--noise-lines", type=int, default=25, choices=[5, 10, 25, 30])
    niah.add_argument("--tokenizer", default=None)
    niah.add_argument("--out", default="runs/niah")
    _add_budget_options(niah)
    report_command = commands.add_parser("report", help="summary.json and tables from DIR/results.jsonl")
    report_command.add_argument("directory")
    commands.add_parser("prepare-model", help="prepare the embedded default model")
    commands.add_parser("serve", help="vLLM's OpenAI server with ARC sessions "
                        "(arc-vllm serve [MODEL] [--arc-...] [vllm options]; see serve --help)",
                        add_help=False)
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["serve"]:
        # Everything after `serve` belongs to vLLM's parser (and our --arc-* options).
        from arc_vllm.serving.launcher import main as serve_main

        return serve_main(argv[1:])
    args = parser.parse_args(argv)

    if args.command == "bench":
        from arc_vllm.agent.niah_bench import run as run_niah
        from arc_vllm.core.tokens import load_counter

        from arc_vllm.policies import POLICIES

        methods = [method for method in args.methods.split(",") if method]
        unknown = [method for method in methods if method not in POLICIES]
        if unknown:
            parser.error(f"unknown method(s) {', '.join(unknown)}; available: {', '.join(POLICIES)}")
        try:
            config = _config(args)
            seeds = [int(seed) for seed in args.seeds.split(",") if seed]
            force = tuple(int(call) for call in args.force.split(",") if call)
        except ValueError as error:
            parser.error(str(error))
        summary = run_niah(args.out, methods, seeds, args.tasks,
                           config, load_counter(args.tokenizer), force, args.noise_lines)
        from arc_vllm.reports.summary import tables

        print(tables(summary))
        return 0
    if args.command == "report":
        from arc_vllm.reports.summary import report, tables

        if not os.path.exists(os.path.join(args.directory, "results.jsonl")):
            parser.error(f"no results.jsonl in {args.directory}")
        print(tables(report(args.directory)))
        return 0
    if args.command == "prepare-model":
        from arc_vllm.model_prep import prepare

        print(prepare())
        return 0
    if args.command == "replay":
        from arc_vllm.agent.replay import run

        if not os.path.exists(args.file):
            parser.error(f"no such file: {args.file}")
        try:
            config = _config(args)
        except ValueError as error:
            parser.error(str(error))
        summary = run(args.file, args.out, config, args.tokenizer)
        shown = {key: value for key, value in summary.items() if key not in ("config",)}
        print(json.dumps(shown, indent=1))
        print(f"wrote {os.path.join(args.out, 'summary.json')}", file=sys.stderr)
        return 0 if summary["over_budget_calls"] == 0 and summary["exactly_recoverable"] == \
            summary["observations"] else 1
    return 2


if __name__ == "__main__":
    sys.exit(main())
