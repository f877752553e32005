"""Folding: the mechanism llm_summary and structured_state share.

The prompt is the task prefix, a memory message (what the model made of older steps) and
the newest steps verbatim. When the prompt would exceed the budget (or a compaction is
forced) the oldest visible steps are folded: sent to the model with the current memory,
and the model's reply becomes the new memory. The folded steps are gone from the prompt for
good. Each fold is one model call, recorded as extra model work (``ModelCalls``).

The fold request itself must fit the model's window: steps go in oldest first while they
fit ``fold_input_tokens``; a single step too long for it is cut to fit (its middle goes,
which is part of what these methods drop).

Subclasses say how to ask (``fold_messages``) and how to keep the answer (``absorb``).
"""

from __future__ import annotations

from arc_vllm.policies.base import SYSTEM, ContextOverflow, ModelCalls, Prompted, step_messages


def step_text(step: list[dict]) -> str:
    return "\n".join(message["content"] for message in step)


class Folding(Prompted, ModelCalls):
    memory_title = "Memory of earlier steps"

    def __init__(self, counter, budget_tokens: int, *, task: str, backend, system: str = SYSTEM,
                 keep_recent: int = 2, fold_max_tokens: int = 128, fold_input_tokens: int | None = None):
        if backend is None:
            raise ValueError(f"{self.name} needs a model backend (--backend vllm or openai)")
        super().__init__(counter, budget_tokens, task=task, system=system)
        self.backend = backend
        self.keep_recent = keep_recent
        self.fold_max_tokens = fold_max_tokens
        self.fold_input_tokens = fold_input_tokens or budget_tokens - fold_max_tokens - 256
        self.steps: list[list[dict]] = []  # steps[:first] are folded into the memory
        self.memory = ""
        self.num_folds = 0

    # --- what subclasses define -------------------------------------------------------------
    def fold_messages(self, steps_text: str) -> list[dict]:
        raise NotImplementedError

    def absorb(self, completion_text: str) -> None:
        raise NotImplementedError

    json_schema: dict | None = None

    # --- the protocol -------------------------------------------------------------------------
    def observe(self, action, observation, *, thought="", returncode=None):
        self.steps.append(step_messages(thought, action, observation))

    def intercept(self, action, *, thought=""):
        return None

    def _messages(self) -> list[dict]:
        memory = [{"role": "user", "content": f"[{self.memory_title}]\n{self.memory}"}] if self.memory else []
        return self.prefix + memory + [m for step in self.steps[self.first:] for m in step]

    def render(self):
        messages = self._messages()
        while self.counter.count_messages(messages) > self.budget_tokens:
            # Fold the older steps first; the newest ones only when nothing else is left.
            if not (self.fold(self.keep_recent) or self.fold(1) or self.fold(0)):
                raise ContextOverflow(f"{self.name}: the prefix and the memory alone are over the budget")
            messages = self._messages()
        return messages

    def on_overflow(self, error=None):
        if not (self.fold(1) or self.fold(0)):
            raise ContextOverflow(f"{self.name}: nothing left to fold")

    def compact(self):
        while self.fold(self.keep_recent):
            pass

    # --- folding ---------------------------------------------------------------------------
    def _fit(self, text: str, tokens: int) -> str:
        """Cut the middle of ``text`` so that it counts at most ``tokens``."""
        while self.counter.count(text) > tokens and len(text) > 200:
            keep = int(len(text) * tokens / self.counter.count(text) * 0.95) // 2
            text = text[:keep] + "\n[...]\n" + text[-keep:]
        return text

    def fold(self, keep: int) -> bool:
        """Fold every visible step but the newest ``keep``; False when there was none."""
        end = len(self.steps) - keep
        if end <= self.first:
            return False
        overhead = self.counter.count_messages(self.fold_messages(""))
        room = max(self.fold_input_tokens - overhead, 64)
        parts, used = [], 0
        for step in self.steps[self.first:end]:
            text = step_text(step)
            cost = self.counter.count(text)
            if used + cost > room:
                if not parts:
                    parts.append(self._fit(text, room))
                break
            parts.append(text)
            used += cost
        # Steps that did not fit in this request are folded by the next render's loop; at
        # least one step goes each time, so folding terminates.
        count = max(len(parts), 1)
        completion = self.backend.complete(self.fold_messages("\n\n".join(parts)), self.fold_max_tokens,
                                           json_schema=self.json_schema)
        self._record(self.name, completion)
        self.absorb(completion.text)
        self.first += count
        self.num_folds += 1
        return True
