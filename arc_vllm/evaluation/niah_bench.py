"""``arc-vllm bench niah``: the paper's Needle-in-a-Haystack over methods, seeds and sweeps.

The agent is the scripted one (the mechanism, isolated) or the model (``--agent model``,
through a backend: the in-process engine or an OpenAI-compatible endpoint). llm_summary and
structured_state take their summaries and states from the backend's model either way.
Results go to DIR/results.jsonl (resumable), then DIR/summary.json, DIR/tables.md and plots.

Run:  arc-vllm bench niah --methods arc,sliding_window,full_context --seeds 42,82,122 \\
          --tasks 20 --out runs/niah
"""

from __future__ import annotations

from arc_vllm.evaluation import bench
from arc_vllm.evaluation.niah import make_task
from arc_vllm.evaluation.scripted import ScriptedAgent


def run(out: str, methods: list[str], seeds: list[int], tasks: int, counter, *,
        settings: list[bench.Setting], context_window: int = 4096, max_tokens: int = 512,
        overrides: dict | None = None, agent: str = "scripted", backend=None,
        concurrency: int = 1, agent_max_tokens: int = 128, max_calls: int = 60, ray_address: str | None = None) -> dict:
    from arc_vllm.agent.model_agent import model_agent
    from arc_vllm.reports.summary import report

    bench.check_methods(methods, backend, model_agent=agent == "model")

    make_config = bench.config_maker(context_window, max_tokens, overrides)
    bench.run(out, benchmark="niah", methods=methods, seeds=seeds, tasks=tasks, settings=settings,
              make_task=lambda seed, index, setting: make_task(seed, index, noise_lines=setting.noise_lines,
                                                               needle_position=setting.needle_position),
              make_config=make_config,
              make_agent=(lambda task, policy: model_agent(backend, agent_max_tokens, task, policy))
              if agent == "model" else lambda task, policy: ScriptedAgent(),
              counter=counter, backend=backend, concurrency=concurrency, ray_address=ray_address, max_calls=max_calls,
              extra={"agent": agent})
    return report(out)
