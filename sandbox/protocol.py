"""What the caller and the sandbox worker share: Redis keys, and the events of one call.

A call's events go on a Redis list, `sandbox:events:<call>`, in order: `started` when a worker
took it, `output` (stream, text) while it runs, then one `done` carrying the result. A caller
that gives up sets `sandbox:cancel:<call>`: a worker that has not taken the call skips it, one
running it stops the code (and the session).
"""

from __future__ import annotations

EVENTS_TTL_S = 600
# How long a chat is remembered to have had a session: its next call then says the state is gone.
SEEN_TTL_S = 24 * 3600


def events_key(call_id: str) -> str:
    return f"sandbox:events:{call_id}"


def claim_key(call_id: str) -> str:
    return f"sandbox:claim:{call_id}"


def cancel_key(call_id: str) -> str:
    return f"sandbox:cancel:{call_id}"


def node_key(chat_id: int) -> str:
    """The queue of the worker holding the chat's live session (expires with its idle time)."""
    return f"sandbox:node:{chat_id}"


def seen_key(chat_id: int) -> str:
    return f"sandbox:seen:{chat_id}"


def direct_queue(queue: str, hostname: str) -> str:
    """A sandbox worker's own queue, beside the shared one: `sandbox.<worker name>`."""
    return f"{queue}.{hostname}"
