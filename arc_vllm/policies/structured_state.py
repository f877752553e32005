"""structured_state: the model folds older steps into a fixed JSON schema (state folding).

The state has four fields (``SCHEMA``): goal, completed_actions, findings, next_step. The
model gets the current state and the steps to fold and answers with the new state; vLLM's
structured outputs keep it to the schema where the backend supports them. A reply that is
not valid JSON for the schema (cut off at ``fold_max_tokens``, or a backend without
structured outputs) leaves the previous state in place and is counted (``num_invalid``).

Drops: everything the schema does not model (keys outside it are discarded) and every
detail the model does not copy into a field; string fields are capped at
``field_max_chars``. Costs: one extra model call per fold, counted and timed.
"""

from __future__ import annotations

import json

from arc_vllm.policies.folding import Folding

SCHEMA = {"type": "object", "additionalProperties": False,
          "required": ["goal", "completed_actions", "findings", "next_step"],
          "properties": {"goal": {"type": "string"},
                         "completed_actions": {"type": "array", "items": {"type": "string"}},
                         "findings": {"type": "array", "items": {"type": "string"}},
                         "next_step": {"type": "string"}}}
INSTRUCTION = ("You maintain an agent's state as JSON with exactly these keys: goal (string), "
               "completed_actions (list of strings), findings (list of strings: exact values "
               "the task may need), next_step (string). Update the state with the new steps. "
               "Reply with the JSON object only.")


def parse_state(text: str, field_max_chars: int = 400) -> dict | None:
    """The state in ``text`` reduced to the schema, or None when it is not valid."""
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        return None
    try:
        raw = json.loads(text[start:end + 1])
    except json.JSONDecodeError:
        return None
    if not isinstance(raw, dict):
        return None
    state = {}
    for key, spec in SCHEMA["properties"].items():
        value = raw.get(key)
        if spec["type"] == "string":
            state[key] = str(value)[:field_max_chars] if isinstance(value, (str, int, float)) else ""
        else:
            items = value if isinstance(value, list) else []
            state[key] = [str(item)[:field_max_chars] for item in items
                          if isinstance(item, (str, int, float))][:16]
    return state


class StructuredState(Folding):
    name = "structured_state"
    memory_title = "State (JSON)"
    json_schema = SCHEMA

    def __init__(self, *args, field_max_chars: int = 400, **kwargs):
        super().__init__(*args, **kwargs)
        self.field_max_chars = field_max_chars
        self.state = {"goal": "", "completed_actions": [], "findings": [], "next_step": ""}
        self.num_invalid = 0

    def fold_messages(self, steps_text: str) -> list[dict]:
        return [{"role": "system", "content": INSTRUCTION},
                {"role": "user", "content": f"Task: {self.task}\n\nState:\n{json.dumps(self.state)}"
                                            f"\n\nNew steps:\n{steps_text}"}]

    def absorb(self, completion_text: str) -> None:
        state = parse_state(completion_text, self.field_max_chars)
        if state is None:
            self.num_invalid += 1
        else:
            self.state = state
        self.memory = json.dumps(self.state, indent=1)
