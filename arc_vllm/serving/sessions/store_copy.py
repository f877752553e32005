"""``arc-vllm store copy SRC DST``: sessions moved between stores (a folder and Redis, either
way), each exactly: its state and its observation log record for record, so the copy renders
the same views and recalls the same bytes. Implicit sessions are indexed by their conversation
in the target too. A session the target already holds is refused before anything is copied.
Copy from a folder no server is serving (a server keeps each store file open), or one served
with ``--arc-shared-sessions``.

    arc-vllm store copy runs/sessions redis://127.0.0.1:6379/0
    arc-vllm store copy redis://127.0.0.1:6379/0 backup/ --session sess_...
"""

from __future__ import annotations

from arc_vllm.serving.sessions.places import storage_for


async def copy_sessions(source: str, target: str, ids: list[str] | None = None) -> list[str]:
    """Copy the sessions ``ids`` (all: None) from the store ``source`` names to ``target``'s;
    returns the ids copied. ``ValueError`` (nothing copied) where the target holds one of them."""
    origin, destination = storage_for(source), storage_for(target)
    try:
        ids = sorted(ids) if ids else await origin.stored_ids()
        held = [id for id in ids if await destination.exists(id)]
        if held:
            raise ValueError(f"{destination.name} already holds {', '.join(held[:3])}"
                             f"{' and more' if len(held) > 3 else ''}; nothing was copied")
        for id in ids:
            exported = await origin.export(id)
            if exported is None:
                raise ValueError(f"{origin.name} holds no session {id}")
            state, frames = exported
            await destination.import_state(id, state, frames)
            if state.get("caller") and state.get("fingerprints"):  # found by its conversation there too
                async with destination.conversations(state["caller"], state["fingerprints"]) as index:
                    index.remember(id, state["caller"], state["fingerprints"])
        return ids
    finally:
        await origin.close()
        await destination.close()
