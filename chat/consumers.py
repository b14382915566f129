from __future__ import annotations

from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer

from core import metrics, strictjson

from . import branches, presenters
from .events import (
    FINAL_SEQ,
    AppMessage,
    ExchangeMessage,
    FragmentMessage,
    QueueMessage,
    StatusMessage,
    exchange_frame,
    frame,
    group_name,
    queue_frame,
    status_frame,
)
from .live import LiveTurn
from .models import Chat, Turn

# Close codes in the 4xxx range: htmx's websocket extension does not reconnect on these.
CLOSE_UNAUTHENTICATED = 4401
# "Service restart" (RFC 6455): a web process shutting down closes its sockets with it, and the
# page reconnects (config/web.py).
CLOSE_RESTARTING = 1012
CLOSE_NOT_FOUND = 4404
# The page only ever sends `{"type": "sync", "turn": N}`; anything much bigger is not from it.
MAX_FRAME_BYTES = 4096
MAX_ID = 2**63 - 1


class ChatConsumer(AsyncWebsocketConsumer):
    """One socket per open chat page. It forwards the chat group's fragments and, on connect or
    on request, sends the exact current state of a running turn (see chat.worker.streaming)."""

    chat_id: int
    group: str = ""
    counted = False

    async def connect(self) -> None:
        user = self.scope.get("user")
        chat_id = int(self.scope["url_route"]["kwargs"]["chat_id"])
        if user is None or not user.is_authenticated:
            await self._refuse(CLOSE_UNAUTHENTICATED)
            return
        if not await _owns(user.pk, chat_id):
            await self._refuse(CLOSE_NOT_FOUND)
            return
        self.chat_id = chat_id
        self.group = group_name(chat_id)
        # Join before accepting and before reading state: nothing published after the client
        # sees the socket open, or after the state read, can be missed.
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()
        metrics.OPEN_WEBSOCKETS.inc()
        self.counted = True
        for turn_id in await _active_turn_ids(chat_id):
            await self.sync_turn(turn_id)
        # The waiting messages as they are now, when there are any (a tab that shows some asks
        # again on reconnect: they may have gone while it was away).
        box = await _box_html(chat_id)
        if box:
            await self.send(text_data=queue_frame(box))

    async def _refuse(self, code: int) -> None:
        # Accept, then close with a 4xxx code: a refused handshake looks like a network failure
        # to the browser, which would retry forever.
        await self.accept()
        await self.close(code=code)

    async def disconnect(self, code: int) -> None:
        if self.counted:
            self.counted = False
            metrics.OPEN_WEBSOCKETS.dec()
        if self.group:
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        # Frames come from anyone who can open the socket: parse strictly, ignore what does not
        # fit, and keep the socket (a bad frame is no reason to drop a reader's live answer).
        if not self.group or not text_data:
            return
        try:
            data = strictjson.loads(text_data, max_bytes=MAX_FRAME_BYTES, max_depth=4)
        except strictjson.InvalidJSON:
            return
        if isinstance(data, dict) and data.get("type") == "queue":
            await self.send(text_data=queue_frame(await _box_html(self.chat_id, always=True)))
            return
        turn_id = _turn_id(data.get("turn")) if isinstance(data, dict) and data.get("type") == "sync" else None
        if turn_id is not None and await _turn_in_chat(turn_id, self.chat_id):
            await self.sync_turn(turn_id)

    async def sync_turn(self, turn_id: int) -> None:
        state = await database_sync_to_async(LiveTurn.load)(turn_id)
        if state is not None:
            view = presenters.turn_from_live(state)
            seq = state.seq
        else:
            found = await database_sync_to_async(presenters.stored_turn_view)(turn_id)
            if found is None:
                return
            seq = 0 if found["active"] else FINAL_SEQ
            view = {**found, "seq": seq}
        if view["can_continue"] and not await _is_latest(turn_id, self.chat_id):
            # Only the chat's latest answer can be continued, as on the page (chat.exchanges).
            view = {**view, "can_continue": False, "continue_url": ""}
        await self.send(text_data=frame(turn_id, seq, presenters.turn_fragment(view), full=True))

    async def dispatch(self, message: Any) -> None:
        # Channels runs Django's connection upkeep (close_old_connections, a hop to a thread and
        # back) before every message it dispatches. A fragment touches no database: forwarded
        # directly, that hop was a large part of the web process's cost per fragment.
        if message.get("type") == "chat.fragment":
            await self.chat_fragment(message)
        else:
            await super().dispatch(message)

    async def chat_fragment(self, event: FragmentMessage) -> None:
        await self.send(text_data=frame(event["turn"], event["seq"], event["html"], full=event.get("full", False)))

    async def chat_status(self, event: StatusMessage) -> None:
        await self.send(text_data=status_frame(event["turn"], event["html"]))

    async def chat_queue(self, event: QueueMessage) -> None:
        await self.send(text_data=queue_frame(event["html"]))

    async def chat_exchange(self, event: ExchangeMessage) -> None:
        await self.send(text_data=exchange_frame(event["turn"], event["html"]))

    async def chat_app(self, event: AppMessage) -> None:
        await self.send(text_data=event["html"])


def _turn_id(value: Any) -> int | None:
    """A turn id from a frame: a positive integer, or its decimal digits (as the page sends it)."""
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 19:
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool) and 0 < value <= MAX_ID:
        return value
    return None


@database_sync_to_async
def _owns(user_id: int, chat_id: int) -> bool:
    return Chat.objects.filter(pk=chat_id, owner_id=user_id).exists()


@database_sync_to_async
def _active_turn_ids(chat_id: int) -> list[int]:
    return list(Turn.objects.filter(chat_id=chat_id, status__in=Turn.ACTIVE).values_list("pk", flat=True))


@database_sync_to_async
def _turn_in_chat(turn_id: int, chat_id: int) -> bool:
    return Turn.objects.filter(pk=turn_id, chat_id=chat_id).exists()


@database_sync_to_async
def _is_latest(turn_id: int, chat_id: int) -> bool:
    chat = Chat.objects.filter(pk=chat_id).first()  # deleted while the socket was open: no
    latest = branches.last_turn(chat) if chat else None
    return latest is not None and latest.pk == turn_id


@database_sync_to_async
def _box_html(chat_id: int, *, always: bool = False) -> str:
    """The chat's waiting messages; "" when there are none, unless `always`."""
    from . import pending
    from .models import PendingMessage

    chat = Chat.objects.get(pk=chat_id)
    if not always and not PendingMessage.objects.filter(chat=chat).exists():
        return ""
    return pending.box_html(chat)
