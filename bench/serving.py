"""Serving benchmarks of `arc-vllm serve`, on the tiny random-weight model (plumbing speed).

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
   ``arc_sessions``: memory stays flat once the cap is reached.

5. Ray Serve (``--ray-replicas 1,2``, alone; writes runs/bench/serving_ray.json): the same load
   of ARC sessions on plain ``arc-vllm serve`` and through ``arc-vllm serve --ray-replicas N``
   with session-affine and round-robin routing: affinity (the share of a session's requests on
   its first replica), the prefix-cache hit rate, throughput, p50/p99, the Ray path's overhead.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from arc_vllm.offline import go_offline  # noqa: E402

go_offline()

from openai import AsyncOpenAI  # noqa: E402

from arc_vllm.core.tokens import HFTokenCounter  # noqa: E402
from arc_vllm.policies import POLICIES  # noqa: E402

PEERS_SERVED = ("swe_agent_last_n", "swe_agent_closed_window", "openhands_masking",
                "openhands_window", "openhands_recent", "sliding_window")
from arc_vllm.model_prep import prepare_tiny  # noqa: E402
from arc_vllm.reports.stats import percentile  # noqa: E402
from arc_vllm.serving.local import Server  # noqa: E402


def tool_turn(session: int, index: int, lines: int):
    body = "".join(f"s{session} t{index} line {n}: ok {n * 31 % 97}\n" for n in range(lines))
    call = {"id": f"c{index}", "type": "function",
            "function": {"name": "cat", "arguments": json.dumps({"path": f"f{index}.log"})}}
    return [{"role": "assistant", "content": f"Step {index}.", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{index}", "content": body}]


async def create_session(client) -> dict:
    response = await client._client.post(str(client.base_url).replace("/v1/", "/v1/arc/sessions"))
    return response.json()


async def one_conversation(client, model, session_index, turns, arc_session, record, nonce):
    # The nonce makes every run's conversations new to the prefix cache, so no run profits
    # from blocks an earlier run left behind.
    messages = [{"role": "system", "content": f"You are an agent ({nonce})."},
                {"role": "user", "content": f"Session {session_index}: check every file."}]
    for index in range(turns):
        messages += tool_turn(session_index, index, 2)
        extra = {"vllm_xargs": {"arc_session": arc_session}} if arc_session else {}
        started = time.perf_counter()
        try:
            response = await client.chat.completions.create(model=model, messages=messages,
                                                            max_tokens=8, extra_body=extra)
        except Exception as error:  # counted, not raised: the benchmark reports errors
            record["errors"].append(repr(error)[:200])
            continue
        record["latency"].append(time.perf_counter() - started)
        arc = (response.model_extra or {}).get("arc")
        if arc:
            record["compactions"] += arc["compactions"]
            record["over_budget"] += arc["view_tokens"] > arc["budget_tokens"]
            record["prompt_tokens"] += arc["prompt_tokens"]
            record["cached_tokens"] += arc["cached_prompt_tokens"]
            if "replica" in arc:
                record["replicas"].setdefault(session_index, []).append(arc["replica"])
        messages.append({"role": "assistant", "content": response.choices[0].message.content or ""})


async def load(server, sessions, turns, with_arc, nonce) -> dict:
    client = AsyncOpenAI(base_url=server.base + "/v1", api_key="none", max_retries=0, timeout=600)
    model = (await client.models.list()).data[0].id
    record = {"latency": [], "errors": [], "compactions": 0, "over_budget": 0, "prompt_tokens": 0,
              "cached_tokens": 0, "replicas": {}}
    ids = [(await create_session(client))["id"] if with_arc else None for _ in range(sessions)]
    started = time.perf_counter()
    await asyncio.gather(*(one_conversation(client, model, i, turns, ids[i], record, nonce)
                           for i in range(sessions)))
    elapsed = time.perf_counter() - started
    await client.close()
    latency = record["latency"]
    return {"arc": with_arc, "sessions": sessions, "turns": turns, "requests": len(latency),
            "errors": len(record["errors"]), "error_samples": record["errors"][:3],
            "over_budget_views": record["over_budget"], "compactions": record["compactions"],
            "seconds": round(elapsed, 2), "requests_per_s": round(len(latency) / elapsed, 2),
            "p50_ms": round(1000 * statistics.median(latency), 1),
            "p99_ms": round(1000 * percentile(latency, 0.99), 1),
            "cached_fraction": round(record["cached_tokens"] / record["prompt_tokens"], 3)
            if record["prompt_tokens"] else None,
            # Per session, the share of its requests served by the replica of its first one.
            "affinity": round(statistics.mean(
                served.count(served[0]) / len(served) for served in record["replicas"].values()), 3)
            if record["replicas"] else None,
            "replicas_used": len({r for served in record["replicas"].values() for r in served})}


def ray_load(args, model) -> dict:
    """The load through Ray Serve (``arc-vllm serve --ray-replicas N``) beside plain
    ``arc-vllm serve``, same sessions and turns: affinity, prefix-cache reuse with
    session-affine and round-robin routing, throughput and latency."""
    out = Path(args.out)
    rows = []
    options = ("--max-num-seqs", "32", "--max-model-len", "8192")
    direct = Server(str(model), out.with_suffix(".direct.log"), *options, in_process_engine=False).wait()
    try:
        rows.append({"setup": "arc-vllm serve", "replicas": 0, "routing": "-",
                     **asyncio.run(load(direct, args.sessions, args.turns, True, "direct"))})
    finally:
        direct.stop()
    for replicas in [int(n) for n in args.ray_replicas.split(",") if n]:
        for routing in ("affinity",) + (("round-robin",) if replicas > 1 else ()):
            server = Server(str(model), out.with_suffix(f".ray{replicas}-{routing}.log"), *options,
                            "--ray-replicas", str(replicas), "--ray-routing", routing,
                            in_process_engine=False)
            try:
                server.wait(timeout=900)
                rows.append({"setup": "--ray-replicas", "replicas": replicas, "routing": routing,
                             **asyncio.run(load(server, args.sessions, args.turns, True,
                                                f"ray{replicas}{routing}"))})
            finally:
                server.stop()
    for row in rows:
        print(f"{row['setup']} {row['replicas']} {row['routing']}: {row['requests']} requests, "
              f"{row['errors']} errors, {row['requests_per_s']} req/s, p50 {row['p50_ms']} ms, "
              f"p99 {row['p99_ms']} ms, cached {row['cached_fraction']}, affinity {row['affinity']}, "
              f"{row['replicas_used']} replicas used")
    return {"rows": rows, "overhead_p50_ratio_ray1_to_direct":
            round(rows[1]["p50_ms"] / rows[0]["p50_ms"], 3) if len(rows) > 1 else None}


async def prefix_reuse(server, turns, counter) -> dict:
    client = AsyncOpenAI(base_url=server.base + "/v1", api_key="none", max_retries=0, timeout=600)
    model = (await client.models.list()).data[0].id
    session = await create_session(client)
    budget = session["budget_tokens"]
    messages = [{"role": "system", "content": "You are an agent."},
                {"role": "user", "content": "Read the logs one by one."}]
    arc_rows, naive_rows = [], []
    for index in range(turns):
        messages += tool_turn(0, index, 5 + (index * 37) % 20)
        response = await client.chat.completions.create(
            model=model, messages=messages, max_tokens=8,
            extra_body={"vllm_xargs": {"arc_session": session["id"]}})
        arc = response.model_extra["arc"]
        arc_rows.append((arc["prompt_tokens"], arc["cached_prompt_tokens"], arc["compactions"] > 0))
        messages.append({"role": "assistant", "content": response.choices[0].message.content or ""})
        # Naive: the newest messages that fit the same budget (the task prefix kept).
        plain = [{"role": m["role"], "content": m.get("content") or json.dumps(m.get("tool_calls"))}
                 for m in messages]
        window = plain[2:]
        while window and counter.count_messages(plain[:2] + window) > budget:
            window = window[1:]
        naive = await client.chat.completions.create(model=model, messages=plain[:2] + window,
                                                     max_tokens=8)
        details = naive.usage.prompt_tokens_details
        naive_rows.append((naive.usage.prompt_tokens, (details.cached_tokens or 0) if details else 0))

    await client.close()

    def fraction(rows):
        total = sum(row[0] for row in rows)
        return round(sum(row[1] for row in rows) / total, 3) if total else 0.0

    steady = [row for row in arc_rows[1:] if not row[2]]
    return {"turns": turns, "budget_tokens": budget,
            "arc_compaction_turns": sum(row[2] for row in arc_rows),
            "arc_cached_fraction_without_compaction": fraction(steady),
            "arc_cached_fraction_all_turns": fraction(arc_rows[1:]),
            "naive_cached_fraction_all_turns": fraction(naive_rows[1:]),
            "arc_prompt_tokens": sum(row[0] for row in arc_rows),
            "naive_prompt_tokens": sum(row[0] for row in naive_rows)}


async def peer_reuse(server, turns, counter, budget: int, method: str) -> dict:
    """The same session as ``prefix_reuse``, the peer's context manager applied client-side."""
    from openai import BadRequestError

    client = AsyncOpenAI(base_url=server.base + "/v1", api_key="none", max_retries=0, timeout=600)
    model = (await client.models.list()).data[0].id
    # The method's name in the task: no method's cached blocks serve another's prompts.
    policy = POLICIES[method](counter, budget, task=f"[{method}] Read the logs one by one.",
                              system="You are an agent.")
    rows, refused = [], 0
    for index in range(turns):
        call, result = tool_turn(0, index, 5 + (index * 37) % 20)
        function = call["tool_calls"][0]["function"]
        policy.observe(f"{function['name']}({function['arguments']})", result["content"],
                       thought=call["content"])
        for attempt in range(2):
            try:
                response = await client.chat.completions.create(
                    model=model, messages=policy.render(), max_tokens=8)
            except BadRequestError:
                refused += 1  # the engine's context-length refusal
                if method == "openhands_window" and attempt == 0:
                    policy.on_overflow("refused")
                    continue
                break
            details = response.usage.prompt_tokens_details
            rows.append((response.usage.prompt_tokens, (details.cached_tokens or 0) if details else 0))
            break
    await client.close()
    total = sum(row[0] for row in rows[1:])
    return {"method": method, "answered_calls": len(rows), "refused_calls": refused,
            "prompt_tokens": sum(row[0] for row in rows),
            "cached_fraction": round(sum(row[1] for row in rows[1:]) / total, 3) if total else 0.0}


async def timed_stream(client, model, messages, extra: dict, max_tokens: int) -> dict:
    """First and last event times (ms) of one streamed answer, and its arc object."""
    started = time.perf_counter()
    first = last = None
    arc = None
    stream = await client.chat.completions.create(
        model=model, messages=messages, max_tokens=max_tokens, stream=True, temperature=0,
        extra_body={"ignore_eos": True, **extra})
    async for chunk in stream:
        now = (time.perf_counter() - started) * 1000
        first = now if first is None else first
        last = now
        arc = (chunk.model_extra or {}).get("arc", arc)
    return {"first_ms": round(first, 1), "last_ms": round(last, 1), "arc": arc}


async def streaming(server, repeats: int, generated: int) -> dict:
    client = AsyncOpenAI(base_url=server.base + "/v1", api_key="none", max_retries=0)
    model = (await client.models.list()).data[0].id
    fits = {"plain": [], "arc": []}
    for repeat in range(repeats):  # alternated, so drifts of the machine fall on both
        messages = [{"role": "user", "content": f"({repeat}) Count from 1 to 300, one number a line."}]
        fits["plain"].append(await timed_stream(client, model, messages, {}, generated))
        session = await create_session(client)
        fits["arc"].append(await timed_stream(client, model, messages,
                                              {"vllm_xargs": {"arc_session": session["id"]}}, generated))
    compaction = {"plain_same_view": [], "arc": [], "arc_render_ms": []}
    for repeat in range(repeats):
        session = await create_session(client)
        messages = [{"role": "system", "content": f"You are an agent (stream {repeat})."},
                    {"role": "user", "content": "Check every file."}]
        xargs = {"arc_session": session["id"], "arc_debug": True}
        for index in range(200):  # up to the first turn that compacts
            messages += tool_turn(repeat, index, 60)
            result = await timed_stream(client, model, messages, {"vllm_xargs": xargs}, max_tokens=8)
            if result["arc"]["compactions"]:
                break
            messages.append({"role": "assistant", "content": "ok"})
        result = await timed_stream(client, model, messages, {"vllm_xargs": xargs}, generated)
        compaction["arc"].append(result)
        compaction["arc_render_ms"].append(result["arc"]["render_ms"])
        # The same view to plain vLLM, uncached: a nonce at its start.
        view = [dict(message) for message in result["arc"]["views"][-1]]
        view[0]["content"] = f"[{time.time_ns()}] " + (view[0].get("content") or "")
        compaction["plain_same_view"].append(await timed_stream(client, model, view, {}, generated))

    def median(rows, key):
        return round(statistics.median(row[key] for row in rows), 1)

    # On 2 cores the API server and the engine core share the CPU: a fast model's events
    # sometimes arrive in one burst (plain vLLM's as well), so the minimum is shown too.
    result = {"repeats": repeats, "generated_tokens": generated,
              "no_compaction": {mode: {"first_ms": median(rows, "first_ms"), "last_ms": median(rows, "last_ms"),
                                       "min_first_ms": min(row["first_ms"] for row in rows)}
                                for mode, rows in fits.items()},
              "compaction_turn": {
                  "arc": {"first_ms": median(compaction["arc"], "first_ms"),
                          "last_ms": median(compaction["arc"], "last_ms"),
                          "render_ms": round(statistics.median(compaction["arc_render_ms"]), 1)},
                  "plain_same_view_uncached": {"first_ms": median(compaction["plain_same_view"], "first_ms"),
                                               "last_ms": median(compaction["plain_same_view"], "last_ms")}}}
    no = result["no_compaction"]
    no["first_event_ratio_arc_to_plain"] = round(no["arc"]["first_ms"] / no["plain"]["first_ms"], 2)
    turn = result["compaction_turn"]
    turn["target_first_ms"] = round(turn["arc"]["render_ms"] + turn["plain_same_view_uncached"]["first_ms"], 1)
    return result


def resident_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def gauge(base: str, name: str) -> float:
    import urllib.request

    text = urllib.request.urlopen(base + "/metrics").read().decode()
    return sum(float(line.split()[-1]) for line in text.splitlines() if line.startswith(name + " ")
               or line.startswith(name + "{"))


async def churn(server, sessions: int, cap: int) -> dict:
    client = AsyncOpenAI(base_url=server.base + "/v1", api_key="none", max_retries=0)
    model = (await client.models.list()).data[0].id
    samples = []
    checkpoints = {10, *(sessions * k // 4 for k in (1, 2, 3, 4))}
    started = time.perf_counter()
    for index in range(1, sessions + 1):
        session = await create_session(client)
        body = "".join(f"session {index} line {n}: value {n * 7919 % 1000}\n" for n in range(2000))[:60000]
        messages = [{"role": "user", "content": f"Session {index}: read the log."},
                    {"role": "assistant", "content": "", "tool_calls": [{"id": "c0", "type": "function",
                     "function": {"name": "cat", "arguments": "{}"}}]},
                    {"role": "tool", "tool_call_id": "c0", "content": body}]
        await client.chat.completions.create(model=model, messages=messages, max_tokens=2,
                                             extra_body={"vllm_xargs": {"arc_session": session["id"]}})
        if index in checkpoints:
            samples.append({"sessions_created": index, "api_server_rss_mib": resident_mib(server.process.pid),
                            "arc_sessions": gauge(server.base, "arc_sessions"),
                            "elapsed_s": round(time.perf_counter() - started, 1)})
            print(samples[-1], flush=True)
    return {"sessions": sessions, "cap": cap, "observation_chars": 60000, "samples": samples,
            "rss_growth_after_cap_mib": round(samples[-1]["api_server_rss_mib"] - samples[1]["api_server_rss_mib"], 1)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=32)
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--prefix-turns", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=3, help="alternating plain/ARC load rounds")
    parser.add_argument("--out", default="runs/bench/serving.json")
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
    parser.add_argument("--ray-replicas", default=None,
                        help="e.g. 1,2: the load through Ray Serve with that many engine replicas "
                             "(affinity and round-robin routing) beside plain arc-vllm serve, only")
    args = parser.parse_args()
    model = prepare_tiny()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    if args.ray_replicas:
        results = {"model": "arc-tiny-llama (random weights, 2 layers)", "machine_cpus": os.cpu_count(),
                   "ray": ray_load(args, model)}
        out = Path(args.out).with_name("serving_ray.json") if args.out == "runs/bench/serving.json" \
            else Path(args.out)
        out.write_text(json.dumps(results, indent=1))
        print(f"wrote {out}")
        return 0
    if args.churn:
        server = Server(str(model), Path(args.out).with_suffix(".churn.log"), "--arc-max-sessions",
                        str(args.churn_cap), in_process_engine=False).wait()
        try:
            results = {"model": "arc-tiny-llama (random weights, 2 layers)",
                       "churn": asyncio.run(churn(server, args.churn, args.churn_cap))}
        finally:
            server.stop()
        out = Path(args.out).with_name("serving_churn.json") if args.out == "runs/bench/serving.json" \
            else Path(args.out)
        out.write_text(json.dumps(results, indent=1))
        print(f"wrote {out}")
        return 0
    if args.streaming_only and args.model:
        from arc_vllm.model_prep import default_model_dir

        model = default_model_dir(require=True) if args.model == "embedded" else Path(args.model)
    server = Server(str(model), Path(args.out).with_suffix(".server.log"), "--max-num-seqs", "32",
                    "--max-model-len", str(args.max_model_len), in_process_engine=False).wait()
    if args.streaming_only:
        try:
            results = {"model": Path(model).name, "machine_cpus": os.cpu_count(),
                       "streaming": asyncio.run(streaming(server, args.repeats, args.generated))}
        finally:
            server.stop()
        out = Path(args.out).with_name(f"serving_streaming_{Path(model).name}.json") \
            if args.out == "runs/bench/serving.json" else Path(args.out)
        out.write_text(json.dumps(results, indent=1))
        print(json.dumps(results["streaming"], indent=1))
        print(f"wrote {out}")
        return 0
    try:
        results = {"model": "arc-tiny-llama (random weights, 2 layers)", "machine_cpus": os.cpu_count()}
        # Rounds of plain then ARC, alternating, so that drifts of this shared machine fall on
        # both; the figures are the medians of the per-round ratios.
        rounds = []
        for round_index in range(0 if args.prefix_only else args.rounds):
            plain = asyncio.run(load(server, args.sessions, args.turns, False, f"p{round_index}"))
            arc = asyncio.run(load(server, args.sessions, args.turns, True, f"a{round_index}"))
            rounds.append({"plain": plain, "arc": arc,
                           "p50_latency_ratio": round(arc["p50_ms"] / plain["p50_ms"], 3),
                           "throughput_ratio": round(arc["requests_per_s"] / plain["requests_per_s"], 3)})
            for label, row in (("plain", plain), ("arc", arc)):
                print(f"round {round_index} {label:>5}: {row['requests']} requests, {row['errors']} errors, "
                      f"{row['requests_per_s']} req/s, p50 {row['p50_ms']} ms, p99 {row['p99_ms']} ms"
                      + (f", {row['over_budget_views']} views over budget, {row['compactions']} "
                         "compactions" if row["arc"] else ""))
        results["load"] = {} if args.prefix_only else {
            "rounds": rounds,
            "median_p50_latency_ratio_arc_to_plain": statistics.median(r["p50_latency_ratio"] for r in rounds),
            "median_throughput_ratio_arc_to_plain": statistics.median(r["throughput_ratio"] for r in rounds),
            "errors": sum(r["plain"]["errors"] + r["arc"]["errors"] for r in rounds),
            "over_budget_views": sum(r["arc"]["over_budget_views"] for r in rounds)}
        if rounds:
            print(f"load: median ARC/plain p50 latency {results['load']['median_p50_latency_ratio_arc_to_plain']}, "
                  f"throughput {results['load']['median_throughput_ratio_arc_to_plain']}")
        counter = HFTokenCounter(str(model))
        results["prefix"] = asyncio.run(prefix_reuse(server, args.prefix_turns, counter))
        prefix = results["prefix"]
        print(f"prefix reuse over {prefix['turns']} turns ({prefix['arc_compaction_turns']} with a "
              f"compaction): ARC {prefix['arc_cached_fraction_without_compaction']} on turns without "
              f"compaction, {prefix['arc_cached_fraction_all_turns']} overall; naive re-render "
              f"{prefix['naive_cached_fraction_all_turns']}")
        prefix["peers"] = [asyncio.run(peer_reuse(server, args.prefix_turns, counter,
                                                  prefix["budget_tokens"], method))
                           for method in PEERS_SERVED]
        for row in prefix["peers"]:
            print(f"  {row['method']}: {row['cached_fraction']} of prompt tokens from the prefix "
                  f"cache, {row['refused_calls']} refused, {row['answered_calls']} answered")
    finally:
        server.stop()
    Path(args.out).write_text(json.dumps(results, indent=1))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
