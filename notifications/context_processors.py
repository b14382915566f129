from __future__ import annotations

from typing import Any

from django.http import HttpRequest


def unread(request: HttpRequest) -> dict[str, Any]:
    """The bell's count on every page of a signed-in user (one indexed count, lazily)."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    from .service import unread_count

    return {"notifications_unread": lambda: unread_count(user.pk)}
