"""ServeOptions: ARC's serving options, declared once. Each field is one ``--arc-NAME`` flag of
``vllm serve`` / ``arc-vllm serve`` with its default, type and help: ``serving/plugin.py``
adds the flags from this table, ``ServeOptions.of(args)`` reads them back, typed, in one
place, and the server keeps that object (``app.state.arc.options``) for every route to read.
A default lives here and nowhere else: the storages and the session manager are given every
value. (The budgets, ``--arc-<budget>``, are ``ArcConfig``'s own table: ``core/config.py``.)

    python -m arc_vllm.serving.options     # every option with its default
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from arc_vllm.core.config import ArcConfig


def flag(default, help: str, metavar: str | None = None, type=None, choices=None, connector: bool = False):
    """An option taking a value. ``connector``: one of the KV connector's own (``kv/config.py``),
    which also reaches ``--kv-transfer-config`` (``plugin.KVReuseOption``)."""
    return field(default=default, metadata=dict(help=help, metavar=metavar, type=type, choices=choices,
                                                connector=connector))


def switch(help: str):
    """An option that is on when given."""
    return field(default=False, metadata=dict(help=help, switch=True))


def tokens(text: str) -> int:
    """A count of tokens on the command line: an integer, 0 or more (argparse's type)."""
    import argparse

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of tokens, not {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected 0 or more tokens, not {value}")
    return value


@dataclass(frozen=True)
class ServeOptions:
    """What ``--arc-*`` set (``--arc`` and ``--arc-kv-reuse``, which also set vLLM's own
    options, are ``plugin.EnableArc``'s; their values are here)."""

    arc: bool = False
    kv_reuse: bool = False
    store: str | None = flag(
        None, "durable sessions: redis://HOST:PORT/DB, rediss:// (TLS) or unix:///PATH for Redis or Valkey, "
        "shared by every replica on every node (any balancer may send any request anywhere); or a folder DIR "
        "(unset: host memory)", "URL|DIR")
    store_dir: str | None = flag(None, "durable sessions in the folder DIR (--arc-store DIR)", "DIR")
    shared_sessions: bool = switch(
        "other processes serve the same store folder (API servers, replicas): each request holds its "
        "session's lock and picks up what another process changed (implied by --api-server-count > 1; a "
        "Redis store is always shared)")
    store_lease: float = flag(
        10.0, "Redis: a replica holds a session for a request under a lease renewed every third of this; "
        "one killed mid-request frees its sessions within it (default 10)", "SECONDS", float)
    store_timeout: float = flag(
        5.0, "Redis: a store that does not answer within this is a 503 naming it, with nothing of the "
        "request stored (default 5)", "SECONDS", float)
    store_max_session_bytes: int = flag(
        2 ** 30, "Redis: the most one session's observations may hold; a request past it is a 413 and "
        "stores nothing (default 1 GiB)", "N", int)
    implicit_sessions: str = flag(
        "on", "on (default): a chat request that names no session gets one by its conversation (its "
        "messages and caller); off: only requests naming a session (X-ARC-Session, vllm_xargs.arc_session) "
        "take the ARC path", choices=("on", "off"))
    session_ttl: float | None = flag(
        None, "a session idle this long leaves memory: unloaded (reloaded on its next request) with "
        "--arc-store, else ended (410) (default: 86400 for implicit sessions, none for explicit ones)",
        "SECONDS", float)
    store_retention: float | None = flag(
        None, "with --arc-store: a stored session unused this long is removed from the store (Redis: its "
        "keys expire) and answers 410 (default: kept)", "SECONDS", float)
    max_sessions: int = flag(
        1024, "sessions held in memory; the least recently used beyond N leave memory as after the TTL "
        "(default 1024)", "N", int)
    ui: bool = switch(
        "serve the session inspector at /v1/arc/ui (read-only: timeline, the view as the model saw it, "
        "stubs opened verbatim, catalog, search; under --api-key the page asks for the key)")
    kv_reuse_host_tokens: int | None = flag(
        None, "with --arc-kv-reuse: tokens of past views kept in host memory over all sessions, oldest "
        "session dropped first (default 65536)", "N", int, connector=True)
    kv_reuse_max_moves: int | None = flag(
        None, "with --arc-kv-reuse: compactions in a row that may move a token's KV before it is computed "
        "again (default 1; more claims more, and whole trajectories drift further from recomputation)",
        "N", tokens, connector=True)
    kv_reuse_min_gain: int | None = flag(
        None, "with --arc-kv-reuse: the least claim a warm-up stage is sent for (default 128; shorter "
        "chains of reusable runs claim little and cost quality)", "N", tokens, connector=True)
    kv_reuse_recompute: int | None = flag(
        None, "with --arc-kv-reuse: recompute the first N tokens of each reused run (0: reuse all; "
        "default by the engine's dtype: 192 in float32, 256 in bfloat16/float16, where reuse's quality "
        "matches recomputation's)", "N", tokens)
    client_compaction: str = flag(
        "arc", "a client's own compaction turn (Codex's, Claude Code's summary request): arc (default) "
        "answers it from ARC's store with no model call, nothing lost; model: the model writes the summary "
        "from ARC's bounded view and ARC appends its stubs, recall line and handle; pass: the model answers "
        "it as any turn (a lossy LLM summary, and ARC's store out of the model's reach)",
        choices=("arc", "model", "pass"))
    admin_key: str | None = flag(
        None, "an operator's key (also give it to --api-key): the session listing, the inspector and every "
        "read route show every caller's sessions with it; other keys see their own only", "KEY")
    caller_header: str | None = flag(
        None, "behind a gateway that authenticates callers: the request header it sets to the caller's "
        "identity (it must set or remove it on every request, and be the only way to reach this server); "
        "sessions then belong to that caller, and a request without it is a 401", "NAME")
    secret: str | None = flag(
        None, "the key that signs compaction handles (unset: one generated and kept in the store, "
        "DIR/.arc-secret or Redis, else one per process)", "TEXT")
    budgets: dict = field(default_factory=dict)  # --arc-<budget>: the ArcConfig budgets named

    @staticmethod
    def flags() -> list:
        """The fields that are ``--arc-NAME`` flags taking a value or a switch, in order."""
        return [spec for spec in fields(ServeOptions) if "help" in spec.metadata]

    @classmethod
    def of(cls, args) -> ServeOptions:
        """The options a parsed command line holds (a flag another parser never added takes its
        default here, the one place a default is read)."""
        given = {spec.name: getattr(args, "arc" if spec.name == "arc" else f"arc_{spec.name}", None)
                 for spec in fields(cls) if spec.name != "budgets"}
        budgets = {name: getattr(args, f"arc_{name}") for name in ArcConfig.options()
                   if getattr(args, f"arc_{name}", None) is not None}
        return cls(**{name: value for name, value in given.items() if value is not None}, budgets=budgets)

    @property
    def store_named(self) -> str | None:
        """``--arc-store``, or its alias ``--arc-store-dir`` (both given: they must agree)."""
        if self.store and self.store_dir and str(self.store) != str(self.store_dir):
            raise ValueError(f"--arc-store {self.store} and --arc-store-dir {self.store_dir}: give one "
                             "(--arc-store-dir is --arc-store's name for a folder)")
        return self.store or self.store_dir


if __name__ == "__main__":
    for spec in ServeOptions.flags():
        print(f"--arc-{spec.name.replace('_', '-')}: {spec.default!r}")
