"""Telling a user something: one call stores the notification, pushes it to every open page of
theirs (the user socket, `notifications.consumers`) and e-mails it through Django's mail backend.
Pages show the browser's own notification too when the user allowed it (static/js/notifications.js).

Any floor from chat up may call `notify`; it never raises: a notification that cannot be pushed
or mailed is still stored and shown on the next page load."""

from __future__ import annotations

import logging

from asgiref.sync import async_to_sync
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.mail import send_mail
from django.template.loader import render_to_string

from core.redis_client import sync_client

from .models import Notification

log = logging.getLogger(__name__)


def group(user_id: int) -> str:
    return f"user-{user_id}"


def _unread_key(user_id: int) -> str:
    return f"tessera:cache:notify-unread:{user_id}"


def unread_count(user_id: int) -> int:
    """The bell's number, on every page: kept in Redis (forgotten whenever it changes), so a page
    view costs no database query for it (the chat page's query budget, bench/run.py)."""
    try:
        cached = sync_client().get(_unread_key(user_id))
    except Exception:
        cached = None
    if cached is not None:
        return int(cached)
    count = Notification.objects.filter(user_id=user_id, read=False).count()
    try:
        sync_client().set(_unread_key(user_id), count, ex=3600)
    except Exception:
        log.warning("Caching the unread count failed", exc_info=True)
    return count


def changed(user_id: int) -> None:
    """The user's notifications changed (new, read): the count is read again, and pushed."""
    try:
        sync_client().delete(_unread_key(user_id))
    except Exception:
        log.warning("Forgetting the unread count failed", exc_info=True)


def notify(user_id: int, kind: str, title: str, body: str = "", url: str = "", *, email: bool = True) -> Notification:
    note = Notification.objects.create(user_id=user_id, kind=kind, title=title[:200], body=body, url=url)
    _push(note)
    if email:
        _mail(note)
    return note


def fragment(user_id: int, note: Notification | None = None) -> str:
    """The bell's count, and the new notification for the centre's list: one partial for page
    and socket (notifications/_live.html)."""
    return render_to_string("notifications/_live.html", {"unread": unread_count(user_id), "note": note, "oob": True})


def push_count(user_id: int) -> None:
    changed(user_id)
    _send(user_id, fragment(user_id))


def _push(note: Notification) -> None:
    changed(note.user_id)
    _send(note.user_id, fragment(note.user_id, note))


def _send(user_id: int, html: str) -> None:
    try:
        from channels.layers import get_channel_layer

        layer = get_channel_layer()
        if layer is not None:
            async_to_sync(layer.group_send)(group(user_id), {"type": "notify.fragment", "html": html})
    except Exception:
        log.warning("Pushing a notification to user %s failed", user_id, exc_info=True)


def _mail(note: Notification) -> None:
    address = get_user_model().objects.filter(pk=note.user_id).values_list("email", flat=True).first()
    if not address:
        return
    link = settings.PUBLIC_URL.rstrip("/") + note.url if note.url else ""
    text = "\n\n".join(part for part in (note.body, link) if part)
    try:
        # One line: a subject with a line break is refused (BadHeaderError) and nothing is sent.
        send_mail("[Tessera] " + " ".join(note.title.split()), text, None, [address])
    except Exception:
        log.warning("E-mailing notification %s failed", note.pk, exc_info=True)
