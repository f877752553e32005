"""Recorded agent trajectories through ARC and its peers, without a model.

    trajectory.py      the trajectory format (steps: action, observation, thought, ...)
    importers.py       real agents' logs (SWE-agent, mini-swe-agent, OpenHands, tau-bench, JSONL)
    replay.py          ``arc-vllm replay``: ARC's bounded views, prefix and KV reuse, exact recall
    replay_methods.py  ``arc-vllm replay --methods``: the same logs through the peers' managers

Below it, ``core``, ``kv`` and ``policies``; ``evaluation`` builds on it."""
