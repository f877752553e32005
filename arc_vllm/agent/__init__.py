"""The agent layer: trajectories, replay, and (later) the agent loop and model backends."""
