"""Streaming: time to the first and to the last server-sent event of a streamed answer, ARC
session against plain vLLM on the same prompts, alternated over repeats (medians)."""

from __future__ import annotations

import statistics
import time

from openai import AsyncOpenAI

from bench.serving_bench.common import create_session, tool_turn


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
