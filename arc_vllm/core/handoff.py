"""The handoff: what ARC answers when a client compacts, written from the store with no model call.

Agents compact on their own (Codex's and Claude Code's summary turns) and the providers' APIs
compact on request; either way the client keeps a summary in place of its history. ARC writes
that summary itself: the paper's Summarize over the session, bounded in tokens, with every
stored observation reachable from it by id.

    [ARC handoff · written by ARC from its store, no model call · 42 tool observation(s) ...]
    ## Task (the user's own words)          F's user messages, verbatim (an earlier handoff in
                                            them is replaced by a line: this one lists it all)
    ## The user's messages since the task   every human turn (``core/human_turns.py``), as the
                                            view shows it: verbatim, or its head and stub line,
                                            the newest always whole (a conversation with native
                                            tool calls; a text-protocol one has instead:)
    ## The newest user-side messages        the user messages of chat turns, newest kept
    ## What was done                        S over every turn before the newest: thoughts and
                                            actions clipped, short results inline, long ones
                                            as citation stubs; collapsed, then elided, to fit
    ## The newest turns, verbatim           the last turns, observations in full where they fit
    ## Stored observations not listed above stubs (the catalog's order), then how to page on
    ## How to recall                        the commands
    [ARC handle arc1....]                   the session's handle (``serving/compaction/handle.py``)

Bounded: at most ``budget_tokens`` tokens of the serving model (the task takes at most a
quarter of the room, the user's messages half (user-side messages an eighth), the newest
turns a quarter, the stub list
min(P, a quarter); "what was done" the rest, and whatever the others leave). Deterministic:
the same session writes the same text. The client keeps it; ARC's session keeps everything.

    handoff = write_handoff(context, budget_tokens=4096, handle="arc1....")
    handoff.text, handoff.tokens, handoff.listed

Run ``python -m arc_vllm.core.handoff`` for an example.
"""

from __future__ import annotations

from dataclasses import dataclass

from arc_vllm.core import formats
from arc_vllm.core.compaction import CompactionState
from arc_vllm.core.config import MINIMUM_HANDOFF_TOKENS
from arc_vllm.core.transcript import content_text
from arc_vllm.core.turn import CHAT, clip



@dataclass(frozen=True)
class Handoff:
    text: str
    tokens: int               # of ``text``, in the serving model's tokens
    listed: frozenset[str]    # ids whose stub, bare id or body the text shows
    observations: int         # stored observations, every one reachable by id


def write_handoff(context, *, budget_tokens: int, handle: str = "") -> Handoff:
    """The handoff of ``context`` (an ``ArcContext``) in at most ``budget_tokens`` tokens."""
    if budget_tokens < MINIMUM_HANDOFF_TOKENS:
        raise ValueError(f"handoff_tokens={budget_tokens}: a handoff needs at least "
                         f"{MINIMUM_HANDOFF_TOKENS} tokens")
    count = context.counter.count
    observations = len(context.store)
    head = formats.handoff_header(observations)
    foot = formats.handoff_recall(observations) + (f"\n{formats.handoff_handle(handle)}" if handle else "")
    # Parts are joined by blank lines and sized one by one: a few tokens for the joins.
    room = budget_tokens - count(head) - count(foot) - 16
    if room < MINIMUM_HANDOFF_TOKENS // 2:
        raise ValueError(f"handoff_tokens={budget_tokens} leaves no room beside the handle and "
                         "the recall line")
    while True:
        parts, listed = _parts(context, room)
        text = "\n\n".join([head, *parts, foot])
        tokens = count(text)
        if tokens <= budget_tokens:
            return Handoff(text, tokens, frozenset(listed), observations)
        room -= tokens - budget_tokens + 8  # the pieces were estimates: the whole is the arbiter


def write_appendix(context, *, budget_tokens: int, handle: str = "") -> Handoff:
    """What ARC appends to a summary the model wrote (``--arc-client-compaction model``): the
    stubs of the stored observations (the catalog's order) as many as fit, how to page to the
    rest, how to recall, and the handle; at most ``budget_tokens`` tokens."""
    count = context.counter.count
    observations = len(context.store)
    head = formats.handoff_header(observations)
    foot = formats.handoff_recall(observations) + (f"\n{formats.handoff_handle(handle)}" if handle else "")
    room = budget_tokens - count(head) - count(foot) - 16
    if room < 0:
        raise ValueError(f"handoff_tokens={budget_tokens} leaves no room beside the handle and the recall line")
    while True:
        catalog = _catalog(context, set(), room)
        listed = {id for id in context.store.ids() if f"§{id}" in catalog}
        text = "\n\n".join(part for part in (head, f"{formats.HANDOFF_SECTIONS['catalog']}\n{catalog}"
                                              if catalog else "", foot) if part)
        tokens = count(text)
        if tokens <= budget_tokens:
            return Handoff(text, tokens, frozenset(listed), observations)
        room -= tokens - budget_tokens + 8


def _parts(context, room: int) -> tuple[list[str], set[str]]:
    count = context.counter.count
    turns = context.turns
    task = _task(context.prefix, room // 4, count)
    shown_humans: list[int] = []
    if context.humans.order:  # the human's words: the same turns, the same bodies, as the view
        humans, shown_humans = context.humans.listing(turns, context.human_forms(), room // 2)
        users = ""
    else:
        humans, users = "", _user_messages(turns, context.store, room // 8, count)
    newest, first_newest, listed = _newest(context, room // 4)
    listed |= {turns[index].obs_id for index in shown_humans}
    used = sum(count(part) for part in (task, humans, users, newest))
    done_room = max(0, room - used)
    done, done_ids = _done(context, first_newest, done_room)
    if len(listed | done_ids) < len(context.store):  # some are on no line: room for their stubs
        done_room = max(0, done_room - min(context.config.catalog_budget_tokens, room // 4))
        done, done_ids = _done(context, first_newest, done_room)
    listed |= done_ids
    catalog = _catalog(context, listed, max(0, room - used - count(done)))
    sections = formats.HANDOFF_SECTIONS
    parts = [f"{sections[name]}\n{body}" for name, body in
             (("task", task), ("humans", humans), ("users", users), ("done", done), ("newest", newest),
              ("catalog", catalog))
             if body]
    return parts, listed


def _task(prefix: list[dict], room: int, count) -> str:
    """F's user messages, verbatim; clipped in the middle (saying so) beyond ``room`` tokens."""
    texts = [content_text(message) for message in prefix if message.get("role") == "user"]
    text = formats.HANDOFF_BLOCK.sub(formats.EARLIER_HANDOFF, "\n\n".join(t for t in texts if t.strip()))
    return _fit(text, room, count)


def _fit(text: str, room: int, count) -> str:
    tokens = count(text)
    if tokens <= room:
        return text
    keep = int(len(text) * room / tokens)
    while keep > 0:
        clipped = formats.clipped_middle(text, keep * 2 // 3, keep // 3)
        if count(clipped) <= room:
            return clipped
        keep = keep * 4 // 5
    return ""


def _user_messages(turns, store, room: int, count) -> str:
    """The user messages of chat turns (what a person typed, or what a text-protocol agent's
    environment answered), newest first until ``room`` is full, shown in order."""
    lines: list[str] = []
    used = 0
    for turn in reversed(turns):
        if turn.style != CHAT or turn.role != "user" or turn.obs_id is None:
            continue
        body = formats.HANDOFF_BLOCK.sub(formats.EARLIER_HANDOFF, store.get(turn.obs_id).content)
        line = formats.handoff_user_message(turn.step, body if count(body) <= room // 2
                                            else f"{clip(body, 160)} ({formats.bare(turn.obs_id)})")
        cost = count(line) + 1
        if used + cost > room:
            break
        lines.append(line)
        used += cost
    return "\n".join(reversed(lines))


def _newest(context, room: int) -> tuple[str, int, set[str]]:
    """The newest turns (at most ``recent_turns``), observations verbatim where they fit,
    else their stubs; the index of the first one shown, and the ids shown."""
    count, turns = context.counter.count, context.turns
    pieces: list[str] = []
    listed: set[str] = set()
    used = 0
    first = len(turns)
    for index in range(len(turns) - 1, max(-1, len(turns) - 1 - context.config.recent_turns), -1):
        turn = turns[index]
        action = clip(turn.action, context.config.action_chars)
        if turn.obs_id is None:
            piece = formats.handoff_turn(turn.step, action, formats.command_response(clip(turn.note or "", 400)))
        elif turn.human:  # listed with the user's messages, once
            piece = formats.handoff_turn(turn.step, action, formats.HANDOFF_HUMAN_ABOVE)
        else:
            body = context.store.get(turn.obs_id).content
            piece = formats.handoff_turn(turn.step, action, body)
            if count(piece) > room // 2:
                piece = formats.handoff_turn(turn.step, action, context.book.cite(turn.obs_id))
        cost = count(piece) + 1
        if used + cost > room:
            break
        pieces.append(piece)
        used += cost
        first = index
        if turn.obs_id is not None:
            listed.add(turn.obs_id)
    return "\n\n".join(reversed(pieces)), first, listed


def _done(context, boundary: int, room: int) -> tuple[str, set[str]]:
    """S over the turns before ``boundary`` in ``room`` tokens (``core/compaction.py``), and
    the ids it shows."""
    if boundary == 0 or room <= 0:
        return "", set()
    state = CompactionState(boundary=boundary)
    summarizer, sizer = context.summarizer, context.counter.count
    summarizer.shrink(context.turns, state, room, sizer, forget=False)
    text, _ = summarizer.summary(context.turns, state)
    if sizer(text) > room:
        return "", set()
    return text, {turn.obs_id for turn in context.turns[state.elided:boundary] if turn.obs_id}


def _catalog(context, listed: set[str], room: int) -> str:
    """Stubs of the stored observations the text does not show yet, in the catalog's order
    (then the store's), as many as ``room`` holds, and how to page on to the rest."""
    count = context.counter.count
    order = context.catalog_order()
    rest = [id for id in order if id not in listed]
    if not rest:
        return ""
    lines: list[str] = []
    used = count(formats.handoff_more(0, len(order))) + 1
    for id in rest:
        stub = context.book.cite(id)
        cost = count(stub) + 1
        if used + cost > room:
            break
        lines.append(stub)
        used += cost
    lines.append(formats.handoff_more(len(lines), len(rest)))
    return "\n".join(lines)


if __name__ == "__main__":
    from arc_vllm.offline import go_offline

    go_offline()  # a process starts here: tiktoken's files from this project's cache
    from arc_vllm.core.config import ArcConfig
    from arc_vllm.core.context import ArcContext
    from arc_vllm.core.tokens import TiktokenCounter

    context = ArcContext(ArcConfig.for_window(8192, 512), TiktokenCounter(), task="Find the needle in the logs.")
    for step in range(30):
        context.observe(f"cat log{step}.txt", f"line {step}: ok\n" * (3 if step % 3 else 300), thought="reading")
    handoff = write_handoff(context, budget_tokens=1024, handle="arc1.example.signature")
    print(handoff.text)
    print(f"-- {handoff.tokens} tokens; {len(handoff.listed)} of {handoff.observations} observations listed")
