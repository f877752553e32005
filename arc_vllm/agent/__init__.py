"""The agent: the episode loop (``loop.py``), the model as the agent (``model_agent.py``) and
the model backends it and the model-calling policies use (``backends.py``: an in-process vLLM
engine, or any OpenAI-compatible endpoint).

Below it, ``core``, ``kv`` and ``policies``; above it, ``evaluation`` (the tasks and benchmarks
the loop runs, the scripted agent among them). ``replay`` (recorded trajectories through ARC)
stands beside it and needs no agent."""
