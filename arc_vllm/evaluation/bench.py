"""The benchmark runner: methods x settings x seeds x tasks, episodes in parallel, into
DIR/results.jsonl.

Every attempt is one line (method, seed, task, setting, passed, answered, crashed, calls,
tokens, times, per-call trace); a rerun skips the attempts already there, so an interrupted
run continues where it stopped. A setting is one point of a sweep (force schedule, noise
lines, recall budget); several settings in one run are the paper's sweep tables. Episodes
run on ``concurrency`` threads so that a model backend batches their calls (the engine
does the work; the threads mostly wait). DIR/summary.json, DIR/tables.md and the plots
follow (``arc_vllm.reports``).

Used by ``arc-vllm bench niah`` and ``arc-vllm bench longbench``.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass
from pathlib import Path

from arc_vllm.agent.loop import episode_record, run_episode
from arc_vllm.policies import MODEL_POLICIES, POLICIES, make_policy

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Setting:
    """One point of a sweep; ``label`` names it in results and tables."""
    force: tuple[int, ...] = (5, 10, 15)
    noise_lines: int | None = 25  # NIAH only
    needle_position: str = "first"  # NIAH only
    recall_budget_chars: int = 16000
    recall_max_chars: int = 8000

    @property
    def label(self) -> str:
        noise = f" noise={self.noise_lines}" if self.noise_lines is not None else ""
        noise += f" needle={self.needle_position}" if self.needle_position != "first" else ""
        return (f"force={','.join(map(str, self.force)) or 'none'}{noise} "
                f"recall={self.recall_budget_chars // 1000}k/{self.recall_max_chars // 1000}k")


def done_attempts(path: Path) -> set[tuple]:
    if not path.exists():
        return set()
    done = set()
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            done.add((row["method"], row.get("setting", ""), row["seed"], row["task"]))
    return done


class LockedCounter:
    """A token counter shared by the episode threads: one count at a time (the tokenizer's
    caches are not thread-safe; counting holds the GIL anyway)."""

    def __init__(self, inner):
        self.inner = inner
        self.name = inner.name
        self.lock = threading.Lock()

    def __getattr__(self, name):
        method = getattr(self.inner, name)

        def locked(*args, **kwargs):
            with self.lock:
                return method(*args, **kwargs)
        return locked


def config_maker(context_window: int, max_tokens: int, overrides: dict | None = None):
    """``make_config(setting)``: ArcConfig for the window, the user's overrides and the
    setting's recall budget. The task prefix needs no budget of its own: B is what F is
    (``core/budget.py``), so long task prompts (small windows, long LongBench questions)
    just leave the other parts less room."""
    from arc_vllm.core.config import ArcConfig

    overrides = dict(overrides or {})

    def make_config(setting: Setting) -> ArcConfig:
        return ArcConfig.for_window(context_window, max_tokens, **{
            **overrides, "recall_budget_chars": setting.recall_budget_chars,
            "recall_max_chars": setting.recall_max_chars})
    return make_config


def check_methods(methods: list[str], backend, model_agent: bool = False) -> None:
    """The one check of a run's methods and backend (ValueError, before anything runs)."""
    unknown = [method for method in methods if method not in POLICIES]
    if unknown:
        raise ValueError(f"unknown method(s) {', '.join(unknown)}; available: {', '.join(POLICIES)}")
    needing = [method for method in methods if method in MODEL_POLICIES]
    if (needing or model_agent) and backend is None:
        who = " and ".join((["the model agent"] if model_agent else []) + needing)
        raise ValueError(f"this run needs a model ({who}): give --backend vllm (in-process "
                         "engine) or --backend openai --base-url URL")


def on_threads(attempt, plan: list[tuple], concurrency: int):
    with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
        futures = [pool.submit(attempt, *item) for item in plan]
        for future in as_completed(futures):
            yield future.result()


def run(out: str | Path, *, benchmark: str, methods: list[str], seeds: list[int], tasks: int,
        settings: list[Setting], make_task, make_config, make_agent, counter, backend=None,
        concurrency: int = 1, max_calls: int = 60, extra: dict | None = None,
        ray_address: str | None = None) -> Path:
    """Run what is not in DIR/results.jsonl yet; returns the results path.

    ``make_task(seed, index, setting)``, ``make_config(setting)`` (an ArcConfig),
    ``make_agent(task, policy)`` (a fresh agent per episode). With ``ray_address`` every
    attempt is a Ray task (``evaluation.ray_bench``) instead of a thread."""
    from tqdm import tqdm

    check_methods(methods, backend, model_agent=extra is not None and extra.get("agent") == "model")
    directory = Path(out)
    directory.mkdir(parents=True, exist_ok=True)
    results = directory / "results.jsonl"
    done = done_attempts(results)
    plan = [(method, setting, seed, index) for setting in settings for method in methods
            for seed in seeds for index in range(tasks) if (method, setting.label, seed, index) not in done]
    from arc_vllm.agent.backends import VllmBackend

    if ray_address is not None and isinstance(backend, VllmBackend):
        raise ValueError("--ray runs episodes in Ray workers: use --backend openai (an endpoint), "
                         "not the in-process engine")
    counter = LockedCounter(counter) if concurrency > 1 and ray_address is None else counter

    def attempt(method: str, setting: Setting, seed: int, index: int) -> dict:
        config = make_config(setting)
        task = make_task(seed, index, setting)
        policy = make_policy(method, counter, config.input_budget_tokens, task=task.prompt, config=config,
                             backend=backend)
        started = time.perf_counter()
        try:
            result = run_episode(policy, task, make_agent(task, policy), counter, config.input_budget_tokens,
                                 force=setting.force, max_calls=getattr(task, "max_calls", max_calls))
        except Exception as error:  # noqa: BLE001 - recorded as a crashed attempt, run goes on
            logger.warning("%s %s: %s: %s", method, task.id, type(error).__name__, error)
            result = episode_record(task.id, method, {
                "passed": False, "answered": False, "crashed": True,
                "reason": f"{type(error).__name__}: {str(error)[:300]}"}, [])
        return {**result, "benchmark": benchmark, "method": method, "seed": seed, "task": index,
                "setting": setting.label, **{key: list(value) if isinstance(value, tuple) else value
                                             for key, value in asdict(setting).items()},
                "wall_ms": round((time.perf_counter() - started) * 1000, 1),
                "context_window": config.context_window, "max_tokens": config.max_tokens, **(extra or {})}

    if ray_address is not None and plan:
        from arc_vllm.evaluation.ray_bench import results as on_ray

        finished = on_ray(attempt, plan, ray_address)
    else:
        finished = on_threads(attempt, plan, concurrency)
    with open(results, "a", encoding="utf-8") as handle, \
            tqdm(total=len(plan), desc=benchmark, unit="attempt", file=sys.stderr) as progress:
        for record in finished:  # only this thread writes
            handle.write(json.dumps(record) + "\n")
            handle.flush()
            progress.update(1)
    return results
