"""rag_memory: past observations chunked by lines, embedded, and retrieved by similarity.

Each observation is cut into chunks of whole lines (about ``chunk_chars`` characters) and
embedded (all-MiniLM-L6-v2, ``policies.embedding``). The prompt holds the task prefix, the
top-k chunks most similar to the current step (the task and the newest action), in the
order they were stored, within ``retrieval_budget_tokens``, and then the newest steps that
still fit, verbatim.

Drops: every chunk the retriever does not rank high enough, and everything between the
retrieved chunks; nothing can be asked for by address. Costs: one embedding per chunk and
one per query (a small model, CPU or GPU), and retrieved text that changes from step to step,
which the engine's prefix cache cannot reuse.
"""

from __future__ import annotations

from arc_vllm.policies.base import SYSTEM, ContextOverflow, Prompted, step_messages


def line_chunks(text: str, chunk_chars: int) -> list[str]:
    chunks, current = [], ""
    for line in text.splitlines(keepends=True):
        if current and len(current) + len(line) > chunk_chars:
            chunks.append(current)
            current = ""
        current += line
    if current:
        chunks.append(current)
    return chunks


class RagMemory(Prompted):
    name = "rag_memory"

    def __init__(self, counter, budget_tokens: int, *, task: str, system: str = SYSTEM,
                 top_k: int = 4, chunk_chars: int = 600, retrieval_budget_tokens: int | None = None):
        super().__init__(counter, budget_tokens, task=task, system=system)
        self.top_k = top_k
        self.chunk_chars = chunk_chars
        self.retrieval_budget_tokens = retrieval_budget_tokens or budget_tokens // 3
        self.steps: list[tuple[str, list[dict]]] = []   # (action, messages)
        self.chunks: list[str] = []
        self.vectors = None

    def observe(self, action, observation, *, thought="", returncode=None):
        from arc_vllm.policies.embedding import embed

        self.steps.append((action, step_messages(thought, action, observation)))
        fresh = [f"[{action}]\n{chunk}" for chunk in line_chunks(observation, self.chunk_chars)]
        if fresh:
            import torch

            vectors = embed(fresh)
            self.vectors = vectors if self.vectors is None else torch.cat([self.vectors, vectors])
            self.chunks += fresh

    def intercept(self, action, *, thought=""):
        return None

    def _retrieved(self) -> str:
        if not self.chunks:
            return ""
        from arc_vllm.policies.embedding import embed

        query = self.task + "\n" + (self.steps[-1][0] if self.steps else "")
        scores = self.vectors @ embed([query])[0]
        ranked = scores.argsort(descending=True)[: self.top_k].tolist()
        chosen, used = [], 0
        for index in ranked:
            cost = self.counter.count(self.chunks[index])
            if used + cost <= self.retrieval_budget_tokens:
                chosen.append(index)
                used += cost
        return "[retrieved from memory]\n" + "\n".join(self.chunks[i] for i in sorted(chosen))

    def render(self):
        retrieved = self._retrieved()
        head = self.prefix + ([{"role": "user", "content": retrieved}] if retrieved else [])
        start = len(self.steps)
        # The newest steps that still fit after the retrieved chunks.
        while start > 0 and self.counter.count_messages(
                head + [m for _, step in self.steps[start - 1:] for m in step]) <= self.budget_tokens:
            start -= 1
        messages = head + [m for _, step in self.steps[start:] for m in step]
        if self.counter.count_messages(messages) > self.budget_tokens:
            raise ContextOverflow("the task prefix and the retrieved chunks alone are over the budget")
        return messages

    def on_overflow(self, error=None):
        self.retrieval_budget_tokens = max(0, self.retrieval_budget_tokens // 2)

    def compact(self):
        pass  # the window is recomputed from the budget every step
