"""The automation pages' sockets (automations/live.py): an automation's page hears its run
history as it changes (only its owner, or an admin, may listen); the list hears each of its
rows' latest-run badge — the owner's own automations, or, for an admin who asked for
everyone's (`?all=1`), all of them."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async

from core.sockets import CLOSE_NOT_FOUND, CLOSE_UNAUTHENTICATED, ListeningSocket

from . import live
from .models import Automation

__all__ = ["CLOSE_NOT_FOUND", "CLOSE_UNAUTHENTICATED", "AutomationConsumer", "AutomationListConsumer"]


def _may_watch(user: Any, automation_id: int) -> bool:
    found = Automation.objects.filter(pk=automation_id)
    return (found if user.is_staff else found.filter(owner_id=user.pk)).exists()


class AutomationConsumer(ListeningSocket):
    async def group_for(self, user: Any) -> str | None:
        automation_id = int(self.scope["url_route"]["kwargs"]["automation_id"])
        if not await database_sync_to_async(_may_watch)(user, automation_id):
            return None
        return live.group(automation_id)

    runs_fragment = ListeningSocket.relay  # "runs.fragment" messages


class AutomationListConsumer(ListeningSocket):
    async def group_for(self, user: Any) -> str:
        query = parse_qs(self.scope.get("query_string", b"").decode("latin-1"))
        # Everyone's badges only to an admin; anyone else asking gets their own.
        return live.EVERYONE if user.is_staff and query.get("all") else live.list_group(user.pk)

    runs_fragment = ListeningSocket.relay
