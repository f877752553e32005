"""Load: N concurrent sessions x T turns (a two-line tool observation per turn, 8 generated
tokens, an 8k window), small enough that no compaction is needed; ARC sessions against the
same conversations sent without ARC (plain vLLM), in alternating rounds."""

from __future__ import annotations

import asyncio
import statistics
import time

from openai import AsyncOpenAI

from arc_vllm.reports.stats import percentile
from bench.serving_bench.common import create_session, tool_turn


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
            record["cached_tokens"] += arc["prefix_cached_tokens"]
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


def rounds(server, sessions: int, turns: int, count: int) -> dict:
    """Rounds of plain then ARC, alternating, so that drifts of this shared machine fall on
    both; the figures are the medians of the per-round ratios."""
    results = []
    for round_index in range(count):
        plain = asyncio.run(load(server, sessions, turns, False, f"p{round_index}"))
        arc = asyncio.run(load(server, sessions, turns, True, f"a{round_index}"))
        results.append({"plain": plain, "arc": arc,
                        "p50_latency_ratio": round(arc["p50_ms"] / plain["p50_ms"], 3),
                        "throughput_ratio": round(arc["requests_per_s"] / plain["requests_per_s"], 3)})
        for label, row in (("plain", plain), ("arc", arc)):
            print(f"round {round_index} {label:>5}: {row['requests']} requests, {row['errors']} errors, "
                  f"{row['requests_per_s']} req/s, p50 {row['p50_ms']} ms, p99 {row['p99_ms']} ms"
                  + (f", {row['over_budget_views']} views over budget, {row['compactions']} "
                     "compactions" if row["arc"] else ""))
    summary = {"rounds": results,
               "median_p50_latency_ratio_arc_to_plain": statistics.median(r["p50_latency_ratio"] for r in results),
               "median_throughput_ratio_arc_to_plain": statistics.median(r["throughput_ratio"] for r in results),
               "errors": sum(r["plain"]["errors"] + r["arc"]["errors"] for r in results),
               "over_budget_views": sum(r["arc"]["over_budget_views"] for r in results)}
    print(f"load: median ARC/plain p50 latency {summary['median_p50_latency_ratio_arc_to_plain']}, "
          f"throughput {summary['median_throughput_ratio_arc_to_plain']}")
    return summary
