"""The Memory toolset: the assistant saves, updates, lists and forgets facts about the user it
works for (`ctx.user_id`: the chat's owner, or the caller of /v1 and /mcp), never anyone else's.

Saving, updating and forgetting change what later chats are told, so they are marked as having
side effects: an admin (or the user, for themselves) can put them behind approval with a tool
policy. They run without asking by default, as a user who says "remember that…" expects."""

from __future__ import annotations

from typing import Annotated, Any

from toolsets.base import ToolContext, ToolFailure, Toolset, tool

from . import store


def _user(ctx: ToolContext) -> int:
    if ctx.user_id is None:
        raise ToolFailure("Memory needs a signed-in user.", error_type="permission_error")
    return ctx.user_id


def _run(action: Any) -> dict[str, Any]:
    try:
        return dict(action())
    except store.Refused as refused:
        raise ToolFailure(str(refused), error_type="invalid_request_error") from refused


def _entry(memory: Any) -> dict[str, Any]:
    return {"id": memory.pk, "text": memory.text, "updated": memory.updated_at.date().isoformat()}


@tool(
    display_name="Save memory",
    side_effects=True,
    policy="auto",
    timeout_s=10,
    summarize=lambda result: ("Remembered: " if result.get("saved") else "Already remembered: ") + result["text"],
    status_text=lambda args: "Remembering…",
)
def save_memory(
    ctx: ToolContext,
    text: Annotated[str, "One short fact about the user, in the third person (e.g. 'Prefers metric units')"],
) -> dict[str, Any]:
    """Remember a fact about the user for later chats, when they ask you to or state a lasting preference."""
    user_id = _user(ctx)

    def act() -> dict[str, Any]:
        memory, created = store.save(user_id, text)
        return {**_entry(memory), "saved": created}

    return _run(act)


@tool(
    display_name="Update memory",
    side_effects=True,
    policy="auto",
    timeout_s=10,
    summarize=lambda result: "Updated: " + result["text"],
    status_text=lambda args: "Updating a memory…",
)
def update_memory(
    ctx: ToolContext,
    memory_id: Annotated[int, "The id of the memory to change"],
    text: Annotated[str, "Its new text: one short fact"],
) -> dict[str, Any]:
    """Replace the text of one of the user's memories, when a fact about them changed."""
    user_id = _user(ctx)
    return _run(lambda: {**_entry(store.update(user_id, memory_id, text)), "updated": True})


@tool(
    display_name="Forget memory",
    side_effects=True,
    policy="auto",
    timeout_s=10,
    summarize=lambda result: "Forgot: " + result["text"],
    status_text=lambda args: "Forgetting…",
)
def forget_memory(ctx: ToolContext, memory_id: Annotated[int, "The id of the memory to forget"]) -> dict[str, Any]:
    """Delete one of the user's memories, when they ask you to forget it."""
    user_id = _user(ctx)
    return _run(lambda: {**_entry(store.forget(user_id, memory_id)), "forgotten": True})


@tool(
    display_name="List memories",
    timeout_s=10,
    summarize=lambda result: f"{result['count']} memor{'y' if result['count'] == 1 else 'ies'}",
    status_text=lambda args: "Looking through memories…",
)
def list_memories(
    ctx: ToolContext,
    query: Annotated[str, "Only memories sharing words with this (empty: all, newest first)"] = "",
) -> dict[str, Any]:
    """List what you remember about the user, with ids to update or forget."""
    user_id = _user(ctx)
    if not store.is_enabled(user_id):
        raise ToolFailure(store.OFF, error_type="invalid_request_error")
    found = store.listing(user_id)
    wanted = store.terms(query[:500]) if isinstance(query, str) else set()
    if wanted:
        found = [m for m in found if wanted & store.terms(m.text)]
    return {"count": len(found), "memories": [_entry(m) for m in found[:100]]}


toolset = Toolset(
    id="memory",
    name="Memory",
    description="Remember facts about you across chats: save, update, list and forget them.",
    tools=[save_memory, update_memory, forget_memory, list_memories],
    # Offered only to a user who has memory on (their account page).
    offered_to=store.is_enabled,
)
