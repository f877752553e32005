"""The serving benchmarks of ``bench/serving.py``, one module each: ``load`` (ARC sessions
against plain vLLM under concurrent load), ``prefix`` (prefix-cache reuse of ARC's views, a
naive re-render and the peers' context managers), ``streaming`` (first and last events of
streamed answers), ``churn`` (memory and disk over many sessions), ``ray`` (the load through
``--ray-replicas``). ``common`` holds what they share. Run them through the CLI:

    .venv/bin/python bench/serving.py --help
"""
