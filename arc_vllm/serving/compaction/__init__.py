"""Compaction on the serving path: every compaction a client or a provider's API asks for is
ARC's, answered from the session's store with no model call.

    ask       what a request asks of compaction (``CompactionAsk``), run after its messages
              are taken in, and its answer when no engine call is needed
    handle    the authenticated handle to a session that a compacting client keeps
    turns     the recognisers of clients' own compaction turns (Codex, Claude Code)

May import: ``sessions``, ``arc_vllm.core`` (the handoff is core's), the base modules and the
serving leaves; nothing of step, apis or the routes.
"""
