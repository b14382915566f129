"""`manage.py setup_demo` (chat/management/commands/setup_demo.py): `make run`'s set-up switches
the Code toolset on once where sandboxes can run, keeps an admin's later choice, and says what
is missing where they cannot."""

from __future__ import annotations

from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from chat.management.commands.setup_demo import Command
from sandbox import jail
from toolsets.models import ToolsetConfig

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _no_example_server(monkeypatch: pytest.MonkeyPatch) -> None:
    # Its registration starts the example server (tests/toolsets/mcp/test_mcp_toolsets.py has it).
    monkeypatch.setattr(Command, "_example_mcp_server", lambda self: None)


def _setup() -> str:
    out = StringIO()
    call_command("setup_demo", stdout=out)
    return out.getvalue()


def test_code_is_switched_on_once_where_sandboxes_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jail, "missing", lambda: "")
    out = _setup()
    assert "Switched on the Code toolset" in out
    assert ToolsetConfig.objects.get(toolset_id="code").enabled
    assert get_user_model().objects.get(username="demo").is_superuser
    # The admin switches it off; the next `make run` keeps that.
    ToolsetConfig.objects.filter(toolset_id="code").update(enabled=False)
    assert "Code toolset" not in _setup()
    assert not ToolsetConfig.objects.get(toolset_id="code").enabled


def test_code_stays_off_and_says_why_where_sandboxes_cannot_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jail, "missing", lambda: "bubblewrap is not installed (Debian: apt-get install bubblewrap).")
    assert "Code toolset left off: bubblewrap is not installed" in _setup()
    assert not ToolsetConfig.objects.filter(toolset_id="code").exists()
