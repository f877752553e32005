"""Where sessions live, measured (``bench/serving.py --stores``; writes runs/bench/serving_stores.json):
the load of N implicit sessions x T turns (what an agent sends: no session named, the whole
conversation each step) on

    memory x1             one replica, sessions in host memory (the reference)
    redis x1              one replica over Redis (``--arc-store redis://``): the store's own cost
    redis x2 sticky       two replicas over one Redis, each session's requests to one of them
                          (a consistent-hash balancer)
    redis x2 alternating  two replicas, each request to the other one (any balancer: every
                          request finds its session changed by the other replica and loads it)
    folder x2 sticky / alternating   two replicas over one folder (``--arc-shared-sessions``)

p50, p99 and req/s of each (the round with the median p50 of ``--rounds``), errors, and the
store's round trips per request (Redis: from the replicas' ``arc_store_round_trip_seconds_count``),
its time (``arc.store_ms``) and the bytes Redis received per request. The target
(issue 46): p50 on Redis at most 1.1x the in-memory store's on one replica, those two measured
up together in alternating rounds (the median of the rounds' ratios). A redis-server of its
own per setup, ``appendfsync always``.
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import tempfile
import time
from pathlib import Path

from openai import AsyncOpenAI

from arc_vllm.reports.stats import percentile
from arc_vllm.serving.local import RedisServer, Server
from bench.serving_bench.common import gauge, tool_turn

SETUPS = (("memory x1", None, 1, "sticky"), ("redis x1", "redis", 1, "sticky"),
          ("redis x2 sticky", "redis", 2, "sticky"), ("redis x2 alternating", "redis", 2, "alternating"),
          ("folder x2 sticky", "folder", 2, "sticky"), ("folder x2 alternating", "folder", 2, "alternating"))


async def conversation(clients, model, index, turns, routing, record, nonce):
    messages = [{"role": "system", "content": f"You are an agent ({nonce})."},
                {"role": "user", "content": f"Session {index}: check every file."}]
    for turn in range(turns):
        messages += tool_turn(index, turn, 2)
        client = clients[(index + (turn if routing == "alternating" else 0)) % len(clients)]
        started = time.perf_counter()
        try:
            response = await client.chat.completions.create(model=model, messages=messages, max_tokens=8)
        except Exception as error:  # counted, not raised: the benchmark reports errors
            record["errors"].append(repr(error)[:200])
            continue
        record["latency"].append(time.perf_counter() - started)
        arc = (response.model_extra or {}).get("arc") or {}
        record["store_ms"].append(arc.get("store_ms", 0.0))
        record["sessions"].setdefault(index, set()).add(arc.get("session"))
        messages.append({"role": "assistant", "content": response.choices[0].message.content or ""})


def trips(servers) -> float:
    return sum(gauge(server.base, "arc_store_round_trip_seconds_count") for server in servers)


def received(redis) -> int:
    """The bytes the redis-server has received (every command of every replica)."""
    return int(redis.command("INFO", "stats").split("total_net_input_bytes:")[1].split()[0]) if redis else 0


async def run_load(servers, sessions, turns, routing, nonce, redis=None) -> dict:
    clients = [AsyncOpenAI(base_url=server.base + "/v1", api_key="none", max_retries=0, timeout=600)
               for server in servers]
    model = (await clients[0].models.list()).data[0].id
    record = {"latency": [], "errors": [], "store_ms": [], "sessions": {}}
    before, bytes_before = trips(servers), received(redis)
    started = time.perf_counter()
    await asyncio.gather(*(conversation(clients, model, index, turns, routing, record, nonce)
                           for index in range(sessions)))
    elapsed = time.perf_counter() - started
    for client in clients:
        await client.close()
    latency = record["latency"]
    return {"requests": len(latency), "errors": len(record["errors"]), "error_samples": record["errors"][:3],
            "seconds": round(elapsed, 2), "requests_per_s": round(len(latency) / elapsed, 2),
            "p50_ms": round(1000 * statistics.median(latency), 1),
            "p99_ms": round(1000 * percentile(latency, 0.99), 1),
            "store_ms_p50": round(statistics.median(record["store_ms"]), 2) if record["store_ms"] else None,
            "store_round_trips_per_request": round((trips(servers) - before) / max(1, len(latency)), 2),
            "redis_bytes_in_per_request": round((received(redis) - bytes_before) / max(1, len(latency)))
            if redis else None,
            # one session per conversation, whichever replica served each step
            "sessions_per_conversation": max((len(ids) for ids in record["sessions"].values()), default=0)}


@contextlib.contextmanager
def replicas(model: Path, name: str, store, count: int, window: int, log_dir: Path):
    """``count`` replicas of the setup ``name`` over ``store`` (None, "redis" with a redis-server
    of its own, "folder"), up until the block ends: (the servers, the redis-server or None)."""
    with tempfile.TemporaryDirectory() as folder:
        redis = RedisServer(Path(folder) / "redis").start() if store == "redis" else None
        options = {"redis": ["--arc-store", redis.url()] if redis else [],
                   "folder": ["--arc-store", f"{folder}/sessions", "--arc-shared-sessions"], None: []}[store]
        # Keep-alive past a request's length: a client that alternates replicas leaves each
        # connection idle while the other answers, and uvicorn's 5 s default closes it under it.
        servers = [Server(str(model), log_dir / f"stores.{name.replace(' ', '_')}.{index}.log", "--max-num-seqs",
                          "32", "--max-model-len", str(window), *options, in_process_engine=False,
                          env={"VLLM_HTTP_TIMEOUT_KEEP_ALIVE": "120"})
                   for index in range(count)]
        try:
            for server in servers:
                server.wait()
            yield servers, redis
        finally:
            for server in servers:
                server.stop()
            if redis is not None:
                redis.stop()


def summary(name: str, runs: list[dict], count: int, routing: str, store) -> dict:
    """A setup's figures: the round with the median p50 (this shared machine drifts)."""
    middle = sorted(runs, key=lambda run: run["p50_ms"])[len(runs) // 2]
    row = {**middle, "replicas": count, "routing": routing, "store": store or "memory",
           "p50_ms_rounds": [run["p50_ms"] for run in runs], "errors_all_rounds": sum(run["errors"] for run in runs)}
    print(f"{name:>22}: {row['requests']} requests, {row['errors']} errors, {row['requests_per_s']} req/s, "
          f"p50 {row['p50_ms']} ms, p99 {row['p99_ms']} ms, store {row['store_ms_p50']} ms and "
          f"{row['store_round_trips_per_request']} round trips per request", flush=True)
    return row


def stores(model: Path, sessions: int, turns: int, window: int, log_dir: Path, rounds: int = 1) -> dict:
    """The target's pair (one replica in memory, one over Redis) up together and measured in
    alternating rounds, as the load benchmark compares ARC with plain vLLM, so that the
    machine's drifts fall on both (the figure: the median of the rounds' p50 ratios); then
    the two-replica setups one after the other."""
    results = {}
    (memory_name, _, _, _), (redis_name, _, _, _) = SETUPS[:2]
    with replicas(model, memory_name, None, 1, window, log_dir) as (memory, _), \
            replicas(model, redis_name, "redis", 1, window, log_dir) as (over_redis, redis):
        pairs = [(asyncio.run(run_load(memory, sessions, turns, "sticky", f"m{index}")),
                  asyncio.run(run_load(over_redis, sessions, turns, "sticky", f"r{index}", redis)))
                 for index in range(rounds)]
    results[memory_name] = summary(memory_name, [pair[0] for pair in pairs], 1, "sticky", None)
    results[redis_name] = summary(redis_name, [pair[1] for pair in pairs], 1, "sticky", "redis")
    ratios = [round(pair[1]["p50_ms"] / pair[0]["p50_ms"], 3) for pair in pairs]
    results["redis_x1_p50_ratio_rounds"] = ratios
    results["redis_x1_p50_ratio"] = statistics.median(ratios)
    results["redis_x1_meets_target"] = results["redis_x1_p50_ratio"] <= 1.1
    print(f"redis x1 / memory x1 p50, per round: {ratios}; median {results['redis_x1_p50_ratio']}", flush=True)
    for name, store, count, routing in SETUPS[2:]:
        with replicas(model, name, store, count, window, log_dir) as (servers, redis):
            runs = [asyncio.run(run_load(servers, sessions, turns, routing, f"{name}{index}", redis))
                    for index in range(rounds)]
        results[name] = summary(name, runs, count, routing, store)
    reference = results[memory_name]["p50_ms"]
    for row in results.values():
        if isinstance(row, dict):
            row["p50_vs_memory_x1"] = round(row["p50_ms"] / reference, 3)
    return results
