"""The run badge: a chat an automation ran (`Chat.automated`) shows its automation's name, a
link to its page and the run's status, in the chat list and the chat's header. Chat does not
know automations: it asks (`signals.run_badges`) about the marked chats only, so a list without
runs costs no query for them, and one with runs one query."""

from __future__ import annotations

from collections.abc import Iterable

from . import signals
from .models import Chat

GONE = signals.RunBadge(name="", url="", status="gone", status_label="automation deleted")


def attach[C: Chat](chats: Iterable[C]) -> list[C]:
    """The chats, each run among them with its `run_badge` (None for the others)."""
    found = list(chats)
    marked = [c.pk for c in found if c.automated]
    badges: dict[int, signals.RunBadge] = {}
    if marked:
        for _receiver, answer in signals.run_badges.send_robust(Chat, chat_ids=marked):
            if isinstance(answer, dict):
                badges.update(answer)
    for chat in found:
        badge = badges.get(chat.pk)
        if badge is None and chat.automated:
            badge = GONE  # its automation was deleted: still a run, of nothing one can open
        chat.run_badge = badge  # type: ignore[attr-defined]
    return found
