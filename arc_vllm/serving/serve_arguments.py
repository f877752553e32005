"""The ``vllm serve`` arguments ``arc-vllm serve`` passes on: ARC on, and this project's
defaults (the embedded model with its tool-calling template, 127.0.0.1) where not given. A
leaf of the launcher's (each Ray replica runs ``arc-vllm serve`` too, so it resolves them
itself); ``given`` also tells the CLI and the Ray front what was typed.

    serve_arguments(["--port", "8001"])  # ["serve", MODEL, "--arc", ..., "--port", "8001"]
"""

from __future__ import annotations


def given(argv: list[str], option: str) -> bool:
    return any(arg == option or arg.startswith(option + "=") for arg in argv)


def serve_arguments(argv: list[str]) -> list[str]:
    """The ``vllm serve`` arguments for ``arc-vllm serve ARGV``."""
    argv = list(argv)
    model = None
    if argv and not argv[0].startswith("-"):
        model, argv = argv[0], argv[1:]
    if model is None and not given(argv, "--model"):
        from arc_vllm.model_prep import default_model_dir

        model = str(default_model_dir(require=True))
    from arc_vllm.model_prep import TOOLS_TEMPLATE, is_embedded

    defaults = ["--arc"]
    if model is not None and is_embedded(model) and not given(argv, "--chat-template"):
        # Function-calling clients get tool calls back; text clients see SmolLM2's own template.
        defaults += ["--chat-template", str(TOOLS_TEMPLATE)]
        if not given(argv, "--tool-call-parser"):
            defaults += ["--enable-auto-tool-choice", "--tool-call-parser", "hermes"]
    if not given(argv, "--host"):
        defaults += ["--host", "127.0.0.1"]
    return ["serve"] + ([model] if model is not None else []) + defaults + argv
