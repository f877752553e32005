"""``arc-vllm bench longbench``: LongBench-v2 hard items read page by page, per method and seed.

The agent is the model (through a backend: the in-process engine or an OpenAI endpoint);
LongBench needs reading and reasoning, so there is no scripted agent for it. Seeds are
paired attempts of the same items (and the engine's sampling seed). Results go to
DIR/results.jsonl (resumable), then DIR/summary.json, DIR/tables.md and plots.

Run:  arc-vllm bench longbench --data data.json --methods arc,sliding_window --tasks 30 \\
          --backend vllm --out runs/longbench
"""

from __future__ import annotations

from arc_vllm.evaluation import bench, longbench


def run(out: str, data: str, methods: list[str], seeds: list[int], tasks: int | None, counter, *,
        settings: list[bench.Setting], backend, context_window: int = 4096, max_tokens: int = 512,
        overrides: dict | None = None, concurrency: int = 8, page_chars: int = 3000,
        agent_max_tokens: int = 128, max_calls: int | None = None, subset: str = "hard",
        ray_address: str | None = None) -> dict:
    from arc_vllm.agent.model_agent import model_agent
    from arc_vllm.reports.summary import report

    bench.check_methods(methods, backend, model_agent=True)  # LongBench: the model reads
    items = longbench.load(data, subset)
    if not items:
        raise ValueError(f"{data}: no {subset} items")
    count = len(items) if tasks is None else min(tasks, len(items))
    make_config = bench.config_maker(context_window, max_tokens, overrides)
    bench.run(out, benchmark="longbench", methods=methods, seeds=seeds, tasks=count, settings=settings,
              make_task=lambda seed, index, setting: longbench.LongBenchTask(
                  items[index], seed, index, page_chars, max_calls),
              make_config=make_config,
              make_agent=lambda task, policy: model_agent(backend, agent_max_tokens, task, policy),
              counter=counter, backend=backend, concurrency=concurrency, ray_address=ray_address,
              extra={"agent": "model"})
    return report(out)
