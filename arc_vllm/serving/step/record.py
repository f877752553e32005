"""What one ARC request did, each figure under one name: the response's ``arc`` object and the
session's record (``GET /v1/arc/sessions/{id}``, the inspector's timeline, ``session.json``)
are both written from one ``StepRecord`` (``serving/step/chat.py`` ``ChatStep.end`` makes it).

    conversation_tokens    the conversation's size as ARC counts it (before any compaction)
    view_tokens            the prompt of the last engine call (``view_tokens_per_call``: each)
    prompt_tokens          vLLM's usage over every engine call of the request
    prefix_cached_tokens   of those, what vLLM's prefix cache held
    max_tokens             the answer's room at the last engine call (``max_tokens_asked``:
                           the client's)
    arc_ms, engine_ms      ARC's own time and the rest of the step (``route_ms``: the route's
                           before the step: parse, translate, route; ``store_ms`` and
                           ``store_round_trips``, the session store's share, join the ``arc``
                           object after the commit: ``sessions/storage.py`` ``spent_figures``)
    compaction_freed_tokens, compaction_uncached_tokens
                           what this request's compactions freed, and what they left the
                           engine to prefill anew (from the first token that differs from the
                           session's last view on: their cost to the prefix cache); 0 without
                           a compaction (uncached: None where the last view is not known here)
    unanswered             present (True) only on the record of a request that ended with no
                           answer sent: an error, or a client that disconnected (its request
                           cancelled); what it archived is kept, no answer is
    human_turns            the user's own messages the last view showed: ``verbatim``,
                           ``shortened`` (head and stub line) and ``left_out`` (no room even for
                           heads); absent in a conversation without human turns

The record keeps the figures the timeline and the dashboards read; the ``arc`` object all of
them. Records stored before these names were one (``session.json`` has always used
``conversation_tokens`` and ``prefix_cached_tokens``) read as they are.

Pure Python; run ``python -m arc_vllm.serving.step.record`` for an example.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field

# The figures a session's record keeps, in its order.
RECORDED = ("conversation_tokens", "view_tokens", "budget_tokens", "prompt_tokens", "prefix_cached_tokens",
            "compactions", "compaction_freed_tokens", "compaction_uncached_tokens", "recalls", "commands_served",
            "engine_calls", "arc_ms", "engine_ms", "max_tokens", "api", "stream")


@dataclass
class StepRecord:
    session: str
    api: str
    stream: bool
    conversation_tokens: int
    view_tokens_per_call: list[int]
    budget_tokens: int
    max_tokens: int
    max_tokens_asked: int | None
    prefix_tokens: int
    compactions: int
    recalls: int
    commands_served: int
    reactive_retries: int
    prompt_tokens: int
    prefix_cached_tokens: int
    kv_warmup_tokens: int
    observations: int
    render_ms: float
    arc_ms: float
    engine_ms: float
    compaction_freed_tokens: int = 0
    compaction_uncached_tokens: int | None = 0
    unanswered: bool = False           # it ended with no answer sent (failed, or its client left)
    route_ms: float | None = None      # None: the step was not reached through a route
    replica: str | None = None         # the Ray replica whose engine served it
    human_turns: dict | None = None    # the user's messages the last view showed, by form
    compaction: dict | None = None     # the compaction asked of this request, as it went
    client_compaction: bool = False    # that compaction was the client's own summary turn
    handoff: str | None = None         # the handoff it wrote, by kind
    time: float = field(default_factory=time.time)

    @property
    def view_tokens(self) -> int:
        return self.view_tokens_per_call[-1] if self.view_tokens_per_call else 0

    @property
    def engine_calls(self) -> int:
        return len(self.view_tokens_per_call)

    def arc(self) -> dict:
        """The response's ``arc`` object."""
        figures = asdict(self)
        arc = {"session": self.session, "api": self.api, "view_tokens": self.view_tokens,
               "engine_calls": self.engine_calls}
        arc.update((name, value) for name, value in figures.items()
                   if name not in ("stream", "route_ms", "replica", "compaction", "client_compaction", "handoff",
                                   "time", "human_turns", "unanswered"))
        if self.human_turns and any(self.human_turns.values()):
            arc["human_turns"] = self.human_turns
        if self.route_ms is not None:
            arc["route_ms"] = self.route_ms
        if self.replica:
            arc["replica"] = self.replica
        if self.compaction is not None:
            arc["compaction"] = self.compaction
            if self.client_compaction:
                arc["client_compaction"] = self.compaction
        return arc

    def record(self) -> dict:
        """The session's record of the request."""
        record = {"time": round(self.time, 3), **{name: getattr(self, name) for name in RECORDED}}
        if self.unanswered:
            record["unanswered"] = True
        if self.handoff is not None:
            record["handoff"] = self.handoff
        if self.human_turns and any(self.human_turns.values()):
            record["human_turns"] = self.human_turns
        return record


if __name__ == "__main__":
    example = StepRecord(session="sess_1", api="chat", stream=False, conversation_tokens=12000,
                         view_tokens_per_call=[3900, 4010], budget_tokens=6144, max_tokens=512, max_tokens_asked=512,
                         prefix_tokens=300, compactions=1, recalls=1, commands_served=1, reactive_retries=0,
                         prompt_tokens=7910, prefix_cached_tokens=3584, kv_warmup_tokens=0, observations=40,
                         render_ms=1.2, arc_ms=3.4, engine_ms=120.0,
                         human_turns={"verbatim": 2, "shortened": 1, "left_out": 0})
    print("arc:", example.arc())
    print("record:", example.record())
