"""`manage.py buildstatic` (chat/management/commands/buildstatic.py) builds and collects only
when the sources changed; the system check says so when nothing was built."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from django.test import override_settings

from chat.checks import static_files_built
from chat.management.commands import buildstatic


def test_the_key_follows_every_source(tmp_path: Path) -> None:
    (tmp_path / "static" / "css").mkdir(parents=True)
    (tmp_path / "frontend").mkdir()
    sources = [
        tmp_path / "static" / "css" / "app.css",
        tmp_path / "frontend" / "build.mjs",
        tmp_path / "package-lock.json",
    ]
    for path in sources:
        path.write_text("one")
    with override_settings(BASE_DIR=tmp_path):
        first = buildstatic.sources_key()
        assert buildstatic.sources_key() == first
        seen = {first}
        for path in sources:
            path.write_text("two")
            seen.add(buildstatic.sources_key())
        (tmp_path / "static" / "img.svg").write_text("<svg/>")
        seen.add(buildstatic.sources_key())
    assert len(seen) == len(sources) + 2


def test_up_to_date_files_are_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    # The test run's setup built them (tests/conftest.py).
    monkeypatch.setattr(buildstatic.Command, "_build", lambda self: pytest.fail("built again"))
    call_command("buildstatic")


def test_changed_sources_are_built_and_collected(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    done: list[str] = []

    def collect(name: str, **options: Any) -> None:
        done.append(name)
        (tmp_path / "staticfiles.json").write_text("{}")

    monkeypatch.setattr(buildstatic.Command, "_build", lambda self: done.append("build"))
    monkeypatch.setattr(buildstatic, "call_command", collect)
    (tmp_path / buildstatic.KEY_FILE).write_text("an older key")
    with override_settings(STATIC_ROOT=tmp_path):
        call_command("buildstatic")
        assert done == ["build", "collectstatic"]
        assert (tmp_path / buildstatic.KEY_FILE).read_text() == buildstatic.sources_key()
        call_command("buildstatic")
        assert done == ["build", "collectstatic"]
        # A manifest that went missing is made again, whatever the key says.
        (tmp_path / "staticfiles.json").unlink()
        call_command("buildstatic")
    assert done == ["build", "collectstatic"] * 2


def test_without_npm_the_error_says_what_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(CommandError, match="npm is needed"):
        buildstatic.Command()._build()


def test_debug_builds_nothing(tmp_path: Path, capsys: Any) -> None:
    with override_settings(DEBUG=True, STATIC_ROOT=tmp_path):
        call_command("buildstatic")
    assert "nothing to build" in capsys.readouterr().out
    assert not any(tmp_path.iterdir())


def test_the_check_warns_until_the_files_are_built(tmp_path: Path) -> None:
    with override_settings(STATIC_ROOT=tmp_path):
        [warning] = static_files_built()
        assert warning.id == "tessera.W001" and "buildstatic" in (warning.hint or "")
        with override_settings(DEBUG=True):
            assert static_files_built() == []
    assert (Path(settings.STATIC_ROOT) / "staticfiles.json").exists()
    assert static_files_built() == []
