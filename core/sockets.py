"""Sockets a page only listens on: a signed-in user's socket joins one Channels group, chosen by
the subclass, and the page receives that group's HTML fragments (the notification bell, an
automation's run history, the automations list). The chat's own socket, which the page also
speaks on, is chat/consumers.py."""

from __future__ import annotations

from typing import Any

from channels.generic.websocket import AsyncWebsocketConsumer

CLOSE_UNAUTHENTICATED = 4401
CLOSE_NOT_FOUND = 4404


class ListeningSocket(AsyncWebsocketConsumer):
    group = ""

    async def group_for(self, user: Any) -> str | None:
        """The group this user's socket joins; None: nothing of that name is theirs to watch."""
        raise NotImplementedError

    async def connect(self) -> None:
        user = self.scope.get("user")
        # Accepted then closed with a 4xxx code: htmx does not retry it forever.
        await self.accept()
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        group = await self.group_for(user)
        if group is None:
            await self.close(code=CLOSE_NOT_FOUND)  # another's looks like none
            return
        self.group = group
        await self.channel_layer.group_add(self.group, self.channel_name)

    async def disconnect(self, code: int) -> None:
        if self.group:
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        return  # the page never speaks on this socket

    async def relay(self, event: dict[str, Any]) -> None:
        """The handler of the group's fragment messages (each subclass names it by their type)."""
        await self.send(text_data=event["html"])
