from __future__ import annotations

from typing import Any

import pytest

from chat.models import AppSettings
from hub.models import ApiToken


@pytest.fixture
def switched_on(db: Any) -> None:
    settings = AppSettings.load()
    settings.mcp_server = True
    settings.save()


@pytest.fixture
def token(user: Any) -> str:
    """An API token that may not approve (the default)."""
    return ApiToken.issue(user, "desktop")[1]
