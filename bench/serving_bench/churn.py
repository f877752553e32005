"""Session churn: N sessions created one after the other, each sent one request holding a
60,000-character observation, on a server with ``--arc-max-sessions``: the API server's
resident memory and ``arc_sessions`` stay flat once the cap is reached. With a store folder
(``--churn-retention``), the folder's size on disk (``arc_store_kept_bytes``, the sessions
kept) with ``--arc-store-retention`` and without, and the requests' latency beside."""

from __future__ import annotations

import time

from openai import AsyncOpenAI

from bench.serving_bench.common import create_session, gauge, resident_mib


async def churn(server, sessions: int, cap: int, store=None) -> dict:
    """``store``: the server's ``--arc-store-dir`` folder, when it has one (its size and the
    sessions it keeps are sampled too)."""
    client = AsyncOpenAI(base_url=server.base + "/v1", api_key="none", max_retries=0)
    model = (await client.models.list()).data[0].id
    samples, latencies = [], []
    checkpoints = {10, *(sessions * k // 4 for k in (1, 2, 3, 4))}
    started = time.perf_counter()
    for index in range(1, sessions + 1):
        session = await create_session(client)
        body = "".join(f"session {index} line {n}: value {n * 7919 % 1000}\n" for n in range(2000))[:60000]
        messages = [{"role": "user", "content": f"Session {index}: read the log."},
                    {"role": "assistant", "content": "", "tool_calls": [{"id": "c0", "type": "function",
                     "function": {"name": "cat", "arguments": "{}"}}]},
                    {"role": "tool", "tool_call_id": "c0", "content": body}]
        sent = time.perf_counter()
        await client.chat.completions.create(model=model, messages=messages, max_tokens=2,
                                             extra_body={"vllm_xargs": {"arc_session": session["id"]}})
        latencies.append(time.perf_counter() - sent)
        if index in checkpoints:
            sample = {"sessions_created": index, "api_server_rss_mib": resident_mib(server.process.pid),
                      "arc_sessions": gauge(server.base, "arc_sessions"),
                      "elapsed_s": round(time.perf_counter() - started, 1)}
            if store is not None:
                folders = [folder for folder in store.iterdir() if folder.name.startswith("sess_")]
                sample.update(stored_sessions=len(folders), store_mib=round(sum(
                    path.stat().st_size for folder in folders for path in folder.iterdir()) / 2 ** 20, 1),
                    arc_store_dir_mib=round(gauge(server.base, "arc_store_kept_bytes") / 2 ** 20, 1))
            samples.append(sample)
            print(sample, flush=True)
    await client.close()
    latencies.sort()
    return {"sessions": sessions, "cap": cap, "observation_chars": 60000, "samples": samples,
            "request_p50_ms": round(1000 * latencies[len(latencies) // 2], 1),
            "request_p99_ms": round(1000 * latencies[int(0.99 * (len(latencies) - 1))], 1),
            "rss_growth_after_cap_mib": round(samples[-1]["api_server_rss_mib"] - samples[1]["api_server_rss_mib"], 1)}
