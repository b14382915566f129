"""The user socket: one per open page of a signed-in user, carrying what `notifications.service`
pushes (the bell's count, a new notification) to every page of theirs at once."""

from __future__ import annotations

from typing import Any

from core.sockets import CLOSE_UNAUTHENTICATED, ListeningSocket

from . import service

__all__ = ["CLOSE_UNAUTHENTICATED", "NotificationConsumer"]


class NotificationConsumer(ListeningSocket):
    async def group_for(self, user: Any) -> str:
        return service.group(user.pk)

    notify_fragment = ListeningSocket.relay  # "notify.fragment" messages
