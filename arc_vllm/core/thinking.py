"""T: the agent's thinking, stored like every observation and kept in view for the loop it is in.

A reasoning model thinks before each action (chat ``reasoning``, Anthropic ``thinking`` blocks,
Responses ``reasoning`` items: vLLM makes each an assistant message's ``reasoning``). The
providers and the models' own templates keep the thinking of the tool loop the model is in
(the turns since the user last spoke) and drop it before; none can give an old thought back.
ARC does both:

- every thought is stored (``record``), under the signature ``thinking``, so its id returns it
  exactly (``_recall §id``) whatever the view shows, and nothing a client clears is lost;
- the **current loop** is the turns after the newest human turn (every turn where there is none:
  a text-protocol agent's whole task). Its thinking is shown on its turn's assistant message as
  long as the turn is in H, in every form of the turn (a cited observation keeps its thinking):
  whole while the loop's thinking shown whole fits its cap (``Budgets.thinking``, counted from
  the newest back), older ones of the loop as a stub: the id that returns it whole, then its
  first tokens. The newest thought of the loop is always whole (only the view's last resort,
  ``shrink``, shows it by its stub);
- an earlier loop's thought is shown as it was: whole while its turn is verbatim, and it keeps
  a form it was given while its loop was the current one. When it leaves the view its id is in
  the catalog (``ArcContext`` lists it), and a turn that leaves H names its thought's id in its
  line of S;
- a thought's form changes only at a compaction (``fit``) or the view's last resort
  (``shrink``), never because a new turn or a human turn arrived, so between compactions H's
  text, and the engine's prefix cache over it, stays as it was. A turn without thinking is
  shown exactly as before thinking was stored.

    thinking = Thinking(store, counter)
    id = thinking.record(reasoning, step)            # before the turn's observation
    form = thinking.form(index, turn_form)           # WHOLE, STUB or HIDDEN
    text = thinking.text(turn, form)                 # what the assistant message's reasoning is
    changed = thinking.fit(turns, start, loop_start, cap)   # at a compaction

Run ``python -m arc_vllm.core.thinking`` for an example.
"""

from __future__ import annotations

from arc_vllm.core import formats
from arc_vllm.core.config import THINKING_HEAD_TOKENS
from arc_vllm.core.recall import chunk_bounds
from arc_vllm.core.turn import VERBATIM

WHOLE, STUB, HIDDEN = 0, 1, 2


class Thinking:
    """The forms of the thoughts of a context's turns in H, and their stored bodies."""

    def __init__(self, store, counter):
        self.store = store
        self.counter = counter
        # Turns whose thought has a form of its own (given at a compaction); any other turn's
        # thought is shown whole while the turn is verbatim, and not otherwise.
        self.forms: dict[int, int] = {}
        self._stubs: dict[str, str] = {}

    def record(self, reasoning: str, step: int) -> str | None:
        """Store a turn's thought (before its observation: the model thought, then acted);
        its id, None for a turn without."""
        return self.store.append(formats.THINKING_SIGNATURE, reasoning, step=step).id if reasoning else None

    def form(self, index: int, turn_form: int) -> int:
        return self.forms.get(index, WHOLE if turn_form == VERBATIM else HIDDEN)

    def text(self, turn, form: int) -> str:
        """The reasoning the view shows for ``turn`` in ``form`` ('' for none)."""
        if not turn.thinking_id or form == HIDDEN:
            return ""
        return turn.reasoning if form == WHOLE else self.stub(turn.thinking_id)

    def stub(self, id: str) -> str:
        """A thought by its id and its first ``THINKING_HEAD_TOKENS`` tokens (cached: fixed)."""
        text = self._stubs.get(id)
        if text is None:
            body = self.store.get(id).content
            start = body[:32 * THINKING_HEAD_TOKENS]  # the head lies within 32 characters a token
            _, end = chunk_bounds(start, self.counter.token_starts(start), THINKING_HEAD_TOKENS)[0]
            text = self._stubs[id] = formats.thinking_stub(" ".join(body[:end].split()), id, len(body))
        return text

    def tokens(self, turn) -> int:
        return self.counter.count(turn.reasoning)

    def fit(self, turns, start: int, loop_start: int, cap: int) -> list[int]:
        """At a compaction: the thoughts of the current loop's turns in H (from ``start``) whole,
        newest first, while they fit ``cap`` tokens (the newest always), the loop's older ones
        as stubs; a stub never grows back. Earlier loops' thoughts keep their forms. The
        turns whose thought changed form."""
        loop = [index for index in range(max(start, loop_start), len(turns)) if turns[index].thinking_id]
        changed, used = [], 0
        for index in reversed(loop):
            tokens = self.tokens(turns[index])
            whole = index == loop[-1] or (self.forms.get(index) != STUB and used + tokens <= cap)
            used += tokens if whole else 0
            form = WHOLE if whole else STUB
            if self.forms.get(index) != form:
                self.forms[index] = form
                changed.append(index)
        return changed

    def shrink(self, turns, start: int, loop_start: int, turn_forms: dict[int, int]) -> int | None:
        """The view's last resort, one thought smaller: an earlier loop's shown thought leaves the
        view (oldest first), else the loop's oldest whole thought but the newest becomes its
        stub, else the newest. The turn whose thought changed, None when none could."""
        forms = {index: self.form(index, turn_forms.get(index, VERBATIM))
                 for index in range(start, len(turns)) if turns[index].thinking_id}
        earlier = [index for index, form in forms.items() if index < loop_start and form != HIDDEN]
        whole = [index for index, form in forms.items() if index >= loop_start and form == WHOLE]
        for index, form in ((earlier[:1], HIDDEN), (whole[:-1][:1], STUB), (whole[-1:], STUB)):
            if index:
                self.forms[index[0]] = form
                return index[0]
        return None

    def forget_before(self, index: int) -> None:
        """Turns before ``index`` left H: their forms are not needed again."""
        for key in [key for key in self.forms if key < index]:
            del self.forms[key]

    def state(self) -> dict:
        """Its part of a context's snapshot; nothing where no thought has a form of its own (a
        snapshot of a conversation without thinking reads as before)."""
        return {"thinking_forms": [[index, form] for index, form in sorted(self.forms.items())]} if self.forms else {}

    def restore(self, state: dict) -> None:
        self.forms = {int(index): form for index, form in state.get("thinking_forms", [])}


if __name__ == "__main__":
    from arc_vllm.offline import go_offline

    go_offline()  # a process starts here: tiktoken's files from this project's cache
    from arc_vllm.core.store import ObsStore
    from arc_vllm.core.tokens import TiktokenCounter
    from arc_vllm.core.turn import TOOL, ToolCall, Turn

    store, counter = ObsStore(), TiktokenCounter()
    thinking = Thinking(store, counter)
    turns = []
    for step in range(1, 5):
        reasoning = f"Step {step}: the log says the retry budget is 7; next I read file {step + 1}. " * 6
        id = thinking.record(reasoning, step)
        record = store.append(f"cat file{step}", f"contents {step}\n" * 50, step=step)
        turns.append(Turn(step, "", f"cat file{step}", record.id, style=TOOL, call=ToolCall(f"c{step}", "cat", "{}"),
                          reasoning=reasoning, thinking_id=id))
    thinking.fit(turns, 0, 0, cap=200)
    for turn in turns:
        print(turn.step, thinking.text(turn, thinking.form(turns.index(turn), VERBATIM))[:120])
