"""Serving benchmarks of `arc-vllm serve`, on the tiny random-weight model (plumbing speed);
each is a module of ``bench/serving_bench/``, this is their command line.

    .venv/bin/python bench/serving.py [--sessions 32] [--turns 20] [--prefix-turns 60]
                                      [--out runs/bench/serving.json]

1. Load: N concurrent sessions x T turns (a two-line tool observation per turn, 8 generated
   tokens, an 8k window), small enough that no compaction is needed. Reports errors, views over budget, throughput
   and p50/p99 latency with ARC sessions, and for the same conversations sent without ARC
   (plain vLLM), and their ratio (target: ARC/plain latency <= 1.05).
2. Prefix reuse: one 60-turn session whose observations overflow the window many times.
   Reports, from vLLM's own usage.prompt_tokens_details.cached_tokens, the fraction of prompt
   tokens served from the prefix cache with ARC's prefix-stable views (on turns without a
   compaction, and overall) vs a naive re-render that keeps the newest messages that fit the
   same budget (target for ARC: >= 0.8 on turns without compaction), and vs the peers'
   context managers (SWE-agent's and OpenHands' maskers and windows, ``policies/``) applied
   by the client before sending the same session to plain vLLM, as those agents do; a prompt
   the engine refuses counts as refused (openhands_window condenses and resends, its trigger).

    .venv/bin/python bench/serving.py --prefix-only      (part 2 alone, about 3 minutes)

3. Streaming (``--streaming-only [--model embedded]``, about 2 minutes on the tiny model;
   writes runs/bench/serving_streaming_MODEL.json): time to the first and to the last
   server-sent event of a streamed answer (``--generated`` tokens, 300, ``ignore_eos``), ARC
   session vs plain vLLM on the same prompts, alternated over repeats (medians). Two cases: a fresh conversation that fits (no compaction; target ARC first event
   <= 1.2x plain's), and a turn that needs a compaction (target: ARC's render/compaction time
   plus plain's first event for the same view sent uncached).

4. Session churn (``--churn N``, alone; writes runs/bench/serving_churn.json): N sessions
   created one after the other, each sent one request holding a 60,000-character
   observation, on a server with ``--arc-max-sessions`` (``--churn-cap``, 50); the API
   server's resident memory (VmRSS) after the first sessions and then every N/4, and
   ``arc_sessions``: memory stays flat once the cap is reached. With ``--churn-retention S``,
   twice more over a store folder (``--arc-store-dir``), with ``--arc-store-retention S`` and
   without: the folder's size and the sessions it keeps, and the requests' latency.

6. Compaction (``--compaction N``, alone; writes runs/bench/serving_compaction.json): one
   session grown to N steps (1,600) of a real trajectory's observations on each API, three
   ways: resent whole, through the client's own compaction turns (answered by ARC), through
   the providers' compaction APIs (``bench/serving_bench/compaction.py``). Latency, arc_ms and
   bytes sent at 100, 400 and N steps; compaction time and tokens decoded; observations back
   exactly at the end.

7. Long session (``--long-session N``, alone; writes runs/bench/serving_long_session.json): one
   conversation resent whole to N steps (1,600) on each API, as agents that never compact
   send it; latency, arc_ms, route_ms, engine_ms and body bytes at 100, 400 and N steps, and
   their growth (targets: arc_ms <= 2x, latency <= 2.5x), and the route's walks over the last
   body timed in-process (``route_parts_ms``; ``bench/serving_bench/long_session.py``).

8. Stores (``--stores``, alone; writes runs/bench/serving_stores.json): the load of implicit
   sessions on one replica in memory, one and two replicas over Redis (sticky and alternating
   routing) and two over a shared folder: p50, p99, req/s, the store's time and round trips per
   request (``bench/serving_bench/stores.py``; target: Redis x1 p50 <= 1.1x memory x1's). With
   ``--long-session N --store redis`` part 7 runs over Redis (``arc.store_ms`` at each checkpoint;
   target: at N steps <= 1.5x that at 100).

5. Ray Serve (``--ray-replicas 1,2``, alone; writes runs/bench/serving_ray.json): the same load
   of ARC sessions on plain ``arc-vllm serve`` and through ``arc-vllm serve --ray-replicas N``
   with session-affine and round-robin routing: affinity (the share of a session's requests on
   its first replica), the prefix-cache hit rate, throughput, p50/p99, the Ray path's overhead.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from arc_vllm.offline import go_offline  # noqa: E402

go_offline()

from arc_vllm.model_prep import prepare_tiny  # noqa: E402
from arc_vllm.serving.local import RedisServer, Server  # noqa: E402
from bench.serving_bench.common import DEFAULT_OUT, TINY, out_path, write  # noqa: E402


def options() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=32)
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--prefix-turns", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=3, help="alternating plain/ARC load rounds")
    parser.add_argument("--out", default=DEFAULT_OUT)
    parser.add_argument("--prefix-only", action="store_true", help="skip the load rounds")
    parser.add_argument("--streaming-only", action="store_true",
                        help="part 3 alone: first/last event times of streamed answers, ARC vs plain")
    parser.add_argument("--repeats", type=int, default=15, help="streamed answers per case (part 3)")
    parser.add_argument("--generated", type=int, default=300, help="tokens per streamed answer (part 3)")
    parser.add_argument("--model", default=None,
                        help="part 3's model: a folder, or 'embedded' (SmolLM2; default: the tiny model)")
    parser.add_argument("--max-model-len", type=int, default=8192, help="the server's window (default 8192)")
    parser.add_argument("--churn", type=int, default=0, metavar="N",
                        help="part 4 alone: N sessions created under --churn-cap, memory sampled")
    parser.add_argument("--churn-cap", type=int, default=50, help="--arc-max-sessions for --churn")
    parser.add_argument("--churn-retention", type=float, default=None, metavar="SECONDS",
                        help="part 4 also over a store folder, with --arc-store-retention SECONDS and without")
    parser.add_argument("--compaction", type=int, default=0, metavar="N",
                        help="part 6 alone: one session grown to N steps on each API, three ways")
    parser.add_argument("--long-session", type=int, default=0, metavar="N",
                        help="part 7 alone: one conversation resent whole to N steps on each API")
    parser.add_argument("--stores", action="store_true",
                        help="part 8 alone: the load over host memory, Redis and a shared folder")
    parser.add_argument("--store", choices=("memory", "redis"), default="memory",
                        help="part 7's session store (redis: a redis-server of its own)")
    parser.add_argument("--ray-replicas", default=None,
                        help="e.g. 1,2: the load through Ray Serve with that many engine replicas "
                             "(affinity and round-robin routing) beside plain arc-vllm serve, only")
    return parser.parse_args()


def ray(args, model) -> int:
    from bench.serving_bench.ray import ray_load

    out = out_path(args.out, "ray")
    write({"model": TINY, "machine_cpus": os.cpu_count(),
           "ray": ray_load(model, args.sessions, args.turns, args.ray_replicas, out)}, args.out, "ray")
    return 0


def compaction(args, model) -> int:
    import json

    from bench.serving_bench.compaction import compaction as run

    server = Server(str(model), out_path(args.out, "compaction").with_suffix(".server.log"),
                    "--max-model-len", str(args.max_model_len), "--served-model-name", "tiny",
                    in_process_engine=False).wait()
    try:
        results = {"model": TINY, "machine_cpus": os.cpu_count(), "window": args.max_model_len,
                   "steps": args.compaction,
                   "compaction": run(server.base, "tiny", args.compaction, args.max_model_len)}
    finally:
        server.stop()
    print(json.dumps(results, indent=1))
    write(results, args.out, "compaction")
    return 0


def long_session(args, model) -> int:
    import json
    import platform

    from arc_vllm.vllm_compat import cpu_flags
    from bench.serving_bench.long_session import long_session as run

    name = "long_session" if args.store == "memory" else f"long_session_{args.store}"
    redis = RedisServer(Path(tempfile.mkdtemp(prefix="arc-bench-redis-"))).start() if args.store == "redis" else None
    server = Server(str(model), out_path(args.out, name).with_suffix(".server.log"),
                    "--max-model-len", str(args.max_model_len), "--served-model-name", "tiny",
                    *(["--arc-store", redis.url()] if redis else []), in_process_engine=False).wait()
    try:
        results = {"model": TINY, "machine_cpus": os.cpu_count(), "machine": platform.machine(),
                   "cpu_flags": cpu_flags(), "window": args.max_model_len, "steps": args.long_session,
                   "store": args.store,
                   "long_session": run(server.base, "tiny", args.long_session, args.max_model_len,
                                       redis.port if redis else None)}
    finally:
        server.stop()
        if redis is not None:
            redis.stop()
            shutil.rmtree(redis.folder, ignore_errors=True)  # its append-only file: nothing reads it later
    print(json.dumps({api: {"checkpoints": r["checkpoints"], "growth": r["growth"],
                            "meets_targets": r["meets_targets"]} for api, r in results["long_session"].items()},
                     indent=1))
    write(results, args.out, name)
    return 0


def stores(args, model) -> int:
    import json
    import platform

    from arc_vllm.vllm_compat import cpu_flags
    from bench.serving_bench.stores import stores as run

    log_dir = out_path(args.out, "stores").parent
    results = {"model": TINY, "machine_cpus": os.cpu_count(), "machine": platform.machine(), "cpu_flags": cpu_flags(),
               "sessions": args.sessions, "turns": args.turns, "window": args.max_model_len,
               "stores": run(model, args.sessions, args.turns, args.max_model_len, log_dir, args.rounds)}
    print(json.dumps(results["stores"], indent=1))
    write(results, args.out, "stores")
    return 0


def churn(args, model) -> int:
    from bench.serving_bench.churn import churn as run

    log = out_path(args.out, "churn").with_suffix(".log")
    # (the result's name, the store folder's options: None for no store folder)
    setups = {"churn": None}
    if args.churn_retention:
        setups.update(churn_store=(), churn_store_with_retention=(
            "--arc-store-retention", f"{args.churn_retention:g}"))
    results = {"model": TINY}
    for name, store_options in setups.items():
        with tempfile.TemporaryDirectory() as folder:
            store = Path(folder) / "sessions" if store_options is not None else None
            options = ["--arc-store-dir", str(store), *store_options] if store else []
            server = Server(str(model), log.with_suffix(f".{name}.log"), "--arc-max-sessions",
                            str(args.churn_cap), *options, in_process_engine=False).wait()
            try:
                results[name] = asyncio.run(run(server, args.churn, args.churn_cap, store))
            finally:
                server.stop()
    write(results, args.out, "churn")
    return 0


def streaming(args, model) -> int:
    import json

    from bench.serving_bench.streaming import streaming as run

    if args.model:
        from arc_vllm.model_prep import default_model_dir

        model = default_model_dir(require=True) if args.model == "embedded" else Path(args.model)
    server = Server(str(model), out_path(args.out, None).with_suffix(".server.log"), "--max-num-seqs", "32",
                    "--max-model-len", str(args.max_model_len), in_process_engine=False).wait()
    try:
        results = {"model": Path(model).name, "machine_cpus": os.cpu_count(),
                   "streaming": asyncio.run(run(server, args.repeats, args.generated))}
    finally:
        server.stop()
    print(json.dumps(results["streaming"], indent=1))
    write(results, args.out, f"streaming_{Path(model).name}")
    return 0


def load_and_prefix(args, model) -> int:
    from bench.serving_bench import load, prefix

    server = Server(str(model), out_path(args.out, None).with_suffix(".server.log"), "--max-num-seqs", "32",
                    "--max-model-len", str(args.max_model_len), in_process_engine=False).wait()
    try:
        results = {"model": TINY, "machine_cpus": os.cpu_count(),
                   "load": {} if args.prefix_only else load.rounds(server, args.sessions, args.turns, args.rounds),
                   "prefix": prefix.run(server, args.prefix_turns, model)}
    finally:
        server.stop()
    write(results, args.out)
    return 0


def main() -> int:
    args = options()
    model = prepare_tiny()
    if args.ray_replicas:
        return ray(args, model)
    if args.churn:
        return churn(args, model)
    if args.compaction:
        return compaction(args, model)
    if args.long_session:
        return long_session(args, model)
    if args.stores:
        return stores(args, model)
    if args.streaming_only:
        return streaming(args, model)
    return load_and_prefix(args, model)


if __name__ == "__main__":
    sys.exit(main())
