"""Messages sent to a chat's channel-layer group. The worker sends only through `send_fragment`.

Each message type is a TypedDict whose `type` names the consumer handler (`chat.fragment` →
`ChatConsumer.chat_fragment`).
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

from channels.layers import get_channel_layer

# The sequence number of a finished turn rendered from the database: above anything streamed,
# so the page applies it whatever it had.
FINAL_SEQ = 10**9


class FragmentMessage(TypedDict):
    type: Literal["chat.fragment"]
    turn: int
    seq: int
    html: str
    full: NotRequired[bool]


def group_name(chat_id: int) -> str:
    return f"chat.{chat_id}"


def frame(turn_id: int, seq: int, html: str, *, full: bool = False) -> str:
    """What goes on the socket: a sequence marker the page uses to drop stale or duplicate
    fragments after a reconnect, then the out-of-band HTML. A `full` frame carries the whole
    turn (a sync) and is applied whatever came before it."""
    return f"<!--seq {turn_id} {seq}{' full' if full else ''}-->{html}"


async def send_fragment(
    chat_id: int, turn_id: int, seq: int, html: str, layer: Any = None, *, full: bool = False
) -> None:
    layer = layer or get_channel_layer()
    message: FragmentMessage = {"type": "chat.fragment", "turn": turn_id, "seq": seq, "html": html}
    if full:
        message["full"] = True
    await layer.group_send(group_name(chat_id), message)
