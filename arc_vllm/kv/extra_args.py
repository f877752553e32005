"""ARC's fields on a vLLM request: what the API server, the in-process backend and the bench
write into ``SamplingParams.extra_args`` (``vllm_xargs`` on the OpenAI API), and what the
engine-side hook and the KV-reuse connector read back. One class, so no module spells a key.

    arc_session       the ARC session the request belongs to (absent: not an ARC request)
    arc_kv_save       false: a warm-up stage, claimed for, not saved as the view (default true)
    arc_kv_recompute  N: claim nothing unless the run's first N tokens were computed
    arc_compactions   compactions the API server ran for this request (the engine counts them)

Read by the API server only (never sent on to the engine):

    arc_compaction    a client marks its request a compaction turn: "plain" or "summary-tags"
                      (the form of the answer it expects; ``serving/compaction/turns.py``)

    ArcExtraArgs(session="s1", save=False).to_dict()      # -> {"arc_session": "s1", "arc_kv_save": False}
    ArcExtraArgs.of(request.sampling_params.extra_args)   # -> ArcExtraArgs(session="s1", save=False, ...)

Pure Python; run ``python -m arc_vllm.kv.extra_args`` for the round trip above.
"""

from __future__ import annotations

from dataclasses import dataclass

SESSION = "arc_session"
KV_SAVE = "arc_kv_save"
KV_RECOMPUTE = "arc_kv_recompute"
COMPACTIONS = "arc_compactions"
COMPACTION_TURN = "arc_compaction"


@dataclass(frozen=True)
class ArcExtraArgs:
    session: str | None = None
    save: bool = True
    recompute_tokens: int = 0
    compactions: int = 0

    @classmethod
    def of(cls, extra_args: dict | None) -> "ArcExtraArgs":
        """Read from a request's ``extra_args`` (None or no ``arc_session``: not ARC's)."""
        extra = extra_args or {}
        session = extra.get(SESSION)
        return cls(session=None if session is None else str(session),
                   save=bool(extra.get(KV_SAVE, True)),
                   recompute_tokens=int(extra.get(KV_RECOMPUTE) or 0),
                   compactions=int(extra.get(COMPACTIONS) or 0))

    @classmethod
    def of_request(cls, request) -> "ArcExtraArgs":
        """Read from an engine request (vLLM's ``Request``, or anything with ``sampling_params``)."""
        params = getattr(request, "sampling_params", None)
        return cls.of(params.extra_args if params is not None else None)

    def to_dict(self) -> dict:
        """The keys to merge into ``extra_args``; defaults are left out, so a plain request
        stays plain and an old engine sees only what it must."""
        extra: dict = {}
        if self.session is not None:
            extra[SESSION] = self.session
        if not self.save:
            extra[KV_SAVE] = False
        if self.recompute_tokens:
            extra[KV_RECOMPUTE] = self.recompute_tokens
        if self.compactions:
            extra[COMPACTIONS] = self.compactions
        return extra


def session_of_body(body) -> str | None:
    """The session a chat request's body names in ``vllm_xargs`` (None: none)."""
    if isinstance(body, dict) and isinstance(body.get("vllm_xargs"), dict):
        return body["vllm_xargs"].get(SESSION)
    return None


def compaction_of_body(body):
    """The compaction turn a body's ``vllm_xargs`` declares (None: none)."""
    if isinstance(body, dict) and isinstance(body.get("vllm_xargs"), dict):
        return body["vllm_xargs"].get(COMPACTION_TURN)
    return None


if __name__ == "__main__":
    args = ArcExtraArgs(session="s1", save=False)
    print(args.to_dict(), ArcExtraArgs.of(args.to_dict()))
