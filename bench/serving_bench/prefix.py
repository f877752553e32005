"""Prefix reuse: one long session whose observations overflow the window many times, from
vLLM's own ``usage.prompt_tokens_details.cached_tokens``: ARC's prefix-stable views against a
naive re-render and the peers' context managers applied by the client."""

from __future__ import annotations

import asyncio
import json

from openai import AsyncOpenAI

from arc_vllm.core.tokens import HFTokenCounter
from arc_vllm.policies import POLICIES
from bench.serving_bench.common import create_session, tool_turn

PEERS_SERVED = ("swe_agent_last_n", "swe_agent_closed_window", "openhands_masking",
                "openhands_window", "openhands_recent", "sliding_window")


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
        arc_rows.append((arc["prompt_tokens"], arc["prefix_cached_tokens"], arc["compactions"] > 0))
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


def run(server, turns: int, model) -> dict:
    counter = HFTokenCounter(str(model))
    result = asyncio.run(prefix_reuse(server, turns, counter))
    print(f"prefix reuse over {result['turns']} turns ({result['arc_compaction_turns']} with a "
          f"compaction): ARC {result['arc_cached_fraction_without_compaction']} on turns without "
          f"compaction, {result['arc_cached_fraction_all_turns']} overall; naive re-render "
          f"{result['naive_cached_fraction_all_turns']}")
    result["peers"] = [asyncio.run(peer_reuse(server, turns, counter, result["budget_tokens"], method))
                       for method in PEERS_SERVED]
    for row in result["peers"]:
        print(f"  {row['method']}: {row['cached_fraction']} of prompt tokens from the prefix "
              f"cache, {row['refused_calls']} refused, {row['answered_calls']} answered")
    return result
