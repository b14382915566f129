"""`manage.py check_secrets` as an operator runs it (the restore procedure itself, with real
backups of SQLite and PostgreSQL, is tests/deploy/test_backup_restore.py)."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from django.core.management import call_command
from django.test import override_settings

from chat.models import LLMModel
from toolsets.models import ToolsetConfig

SECRET = "sk-live-do-not-print-1a2b"
OTHER = "exa-key-do-not-print-3c4d"


@pytest.fixture
def secrets_stored(db: Any) -> LLMModel:
    ToolsetConfig.objects.create(toolset_id="exa", api_key=OTHER)
    return LLMModel.objects.create(name="GPT", model="openai/gpt-4o", api_key=SECRET)


def run(*args: str, stdin: str = "") -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    code = 0
    try:
        call_command("check_secrets", *args, stdout=out, stderr=err, no_color=True)
    except SystemExit as exc:
        code = int(exc.code or 0)
    return code, out.getvalue() + err.getvalue()


def test_all_readable_exits_zero_with_a_count_per_field(secrets_stored: LLMModel) -> None:
    code, output = run()

    assert code == 0
    assert "chat.LLMModel.api_key" in output
    assert "toolsets.ToolsetConfig.api_key" in output
    assert "All 2 stored secrets decrypt with this key." in output
    assert SECRET not in output and OTHER not in output


def test_a_wrong_key_exits_one_and_says_which_rows_and_what_to_do(secrets_stored: LLMModel) -> None:
    with override_settings(FIELD_ENCRYPTION_KEY="not the key these were saved with"):
        code, output = run()

    assert code == 1
    assert f"1 cannot be decrypted with this key (primary keys: {secrets_stored.pk})" in output
    assert "2 of 2 stored secrets cannot be read with this key." in output
    assert "FIELD_ENCRYPTION_KEY" in output
    assert SECRET not in output and OTHER not in output
    assert "fernet:" not in output


def test_json_report(secrets_stored: LLMModel) -> None:
    with override_settings(FIELD_ENCRYPTION_KEY="not the key these were saved with"):
        code, output = run("--json")

    report = json.loads(output)
    assert code == 1
    assert report["ok"] is False
    assert (report["checked"], report["failed"]) == (2, 2)
    by_field = {f["field"]: f for f in report["fields"]}
    assert by_field["chat.LLMModel.api_key"]["failures"] == {
        "cannot be decrypted with this key": [str(secrets_stored.pk)]
    }
    assert SECRET not in output


def test_clearing_unreadable_secrets_asks_first(secrets_stored: LLMModel, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("builtins.input", lambda prompt: "no")
    with override_settings(FIELD_ENCRYPTION_KEY="the new key"):
        code, output = run("--clear-unreadable")
        assert code == 1
        assert "Nothing changed." in output

        code, output = run("--clear-unreadable", "--no-input")
        assert code == 0
        assert "Blanked 2 unreadable secrets" in output
        code, output = run()
        assert code == 0
        assert LLMModel.objects.get(pk=secrets_stored.pk).api_key == ""


def test_nothing_stored_is_fine(db: Any) -> None:
    code, output = run()

    assert code == 0
    assert "All 0 stored secrets decrypt with this key." in output
