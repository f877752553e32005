"""``--ray-replicas N``: the Ray Serve front (``front``) that keeps each session on one engine
replica, and the replica (``replica``) that runs ``arc-vllm serve``. At the top of serving:
may import any of it.
"""
