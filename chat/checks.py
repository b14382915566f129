"""System checks run by management commands (`manage.py serve` among them)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from django.core import checks


def static_files_built(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """Without DEBUG, every page names its stylesheet and scripts through the manifest that
    `manage.py buildstatic` writes: without it, every page would fail."""
    if settings.DEBUG or (Path(settings.STATIC_ROOT) / "staticfiles.json").exists():
        return []
    return [
        checks.Warning(
            f"The static files are not built: {settings.STATIC_ROOT} has no manifest, so pages will fail.",
            hint="Run `python manage.py buildstatic` (`make run` does), or set DEBUG=true for development.",
            id="tessera.W001",
        )
    ]
