"""The paper's benchmarks and the project's own, run by ``arc-vllm bench``.

    niah.py, scripted.py          Needle-in-a-Haystack tasks and the scripted agent
    niah_bench.py                 ``bench niah``; longbench.py + longbench_bench.py: ``bench longbench``
    bench.py                      the runner both use (episodes over methods and seeds, threads)
    ray_bench.py                  the same episodes as Ray tasks (``--ray``)
    kv_reuse_bench.py             ``bench kv-reuse``: what --arc-kv-reuse saves and costs

The top of the agent side: it uses ``agent``, ``replay``, ``kv``, ``policies`` and ``core``."""
