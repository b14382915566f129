"""The scheduler's now. Tests point TESSERA_AUTOMATIONS_CLOCK_FILE at a file holding an ISO 8601
time and move it, so real beat and worker processes see minutes pass without anyone waiting
for them; unset (production), it is the system clock."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from django.conf import settings
from django.utils import timezone


def now() -> datetime:
    path = settings.AUTOMATIONS_CLOCK_FILE
    if path:
        try:
            return datetime.fromisoformat(Path(path).read_text().strip())
        except (OSError, ValueError):
            pass
    return timezone.now()
