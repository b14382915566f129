from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test import override_settings

from chat.models import LLMModel
from core import secrets_check
from toolsets.mcp.models import MCPServer, OAuthGrant
from toolsets.models import ToolsetConfig, UserToolsetConfig

SECRETS = {
    "model": "sk-live-model-key-0001",
    "toolset": "exa-app-key-0002",
    "user_toolset": "exa-user-key-0003",
    "headers": '{"X-Api-Key": "mcp-header-0004"}',
    "env": '{"TOKEN": "mcp-env-0005"}',
    "client_info": '{"client_secret": "oauth-client-0006"}',
    "tokens": '{"access_token": "oauth-token-0007"}',
}


@pytest.fixture
def stored(user: Any) -> dict[str, Any]:
    """One secret in every encrypted column Tessera has."""
    model = LLMModel.objects.create(name="GPT", model="openai/gpt-4o", api_key=SECRETS["model"])
    ToolsetConfig.objects.create(toolset_id="exa", api_key=SECRETS["toolset"])
    UserToolsetConfig.objects.create(user=user, toolset_id="exa", api_key=SECRETS["user_toolset"])
    server = MCPServer.objects.create(
        name="Docs", slug="docs", url="https://mcp.example.com/mcp", headers=SECRETS["headers"], env=SECRETS["env"]
    )
    OAuthGrant.objects.create(user=user, server=server, client_info=SECRETS["client_info"], tokens=SECRETS["tokens"])
    # Blank secrets are not secrets: nothing to decrypt.
    LLMModel.objects.create(name="Local", model="ollama_chat/llama3.1")
    return {"model": model}


def test_every_encrypted_column_of_every_model_is_found() -> None:
    labels = {f"{model._meta.label}.{f.name}" for model, f in secrets_check.encrypted_fields()}

    assert labels >= {
        "chat.LLMModel.api_key",
        "toolsets.ToolsetConfig.api_key",
        "toolsets.UserToolsetConfig.api_key",
        "mcp.MCPServer.headers",
        "mcp.MCPServer.env",
        "mcp.OAuthGrant.client_info",
        "mcp.OAuthGrant.tokens",
    }


@pytest.mark.django_db
def test_every_stored_secret_decrypts_with_the_key_it_was_saved_with(stored: dict[str, Any]) -> None:
    report = secrets_check.check()

    assert report.ok
    assert report.checked == len(SECRETS)
    assert {f.label: f.checked for f in report.fields if f.checked} == {
        "chat.LLMModel.api_key": 1,
        "toolsets.ToolsetConfig.api_key": 1,
        "toolsets.UserToolsetConfig.api_key": 1,
        "mcp.MCPServer.headers": 1,
        "mcp.MCPServer.env": 1,
        "mcp.OAuthGrant.client_info": 1,
        "mcp.OAuthGrant.tokens": 1,
    }


@pytest.mark.django_db
def test_with_another_key_every_secret_fails_and_the_report_holds_no_secret(stored: dict[str, Any]) -> None:
    with override_settings(FIELD_ENCRYPTION_KEY="a different key altogether"):
        report = secrets_check.check()

    assert not report.ok
    assert report.failed == report.checked == len(SECRETS)
    model_field = next(f for f in report.fields if f.label == "chat.LLMModel.api_key")
    assert model_field.failures == {secrets_check.UNDECRYPTABLE: [str(stored["model"].pk)]}
    text = repr(report)
    assert not any(secret in text for secret in SECRETS.values())
    assert "fernet:" not in text


@pytest.mark.django_db
def test_a_value_written_unencrypted_is_reported_as_such(stored: dict[str, Any]) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {LLMModel._meta.db_table} SET api_key = %s WHERE id = %s", ["sk-raw", stored["model"].pk]
        )

    report = secrets_check.check()

    assert not report.ok
    assert report.failed == 1
    model_field = next(f for f in report.fields if f.label == "chat.LLMModel.api_key")
    assert model_field.failures == {secrets_check.NOT_ENCRYPTED: [str(stored["model"].pk)]}


@pytest.mark.django_db
def test_clearing_blanks_only_the_unreadable_secrets(stored: dict[str, Any]) -> None:
    # The model's key was saved with a key that is now lost; the others with the current one.
    with override_settings(FIELD_ENCRYPTION_KEY="the lost key"):
        LLMModel.objects.filter(pk=stored["model"].pk).update(api_key="sk-saved-with-the-lost-key")
    report = secrets_check.check()
    assert report.failed == 1

    assert secrets_check.clear_unreadable(report) == 1

    assert secrets_check.check().ok
    assert LLMModel.objects.get(pk=stored["model"].pk).api_key == ""
    assert ToolsetConfig.objects.get(toolset_id="exa").api_key == SECRETS["toolset"]


def test_the_key_source_is_named_never_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FIELD_ENCRYPTION_KEY", "field-key-value")
    monkeypatch.setenv("SECRET_KEY", "secret-key-value")
    assert secrets_check.key_source() == "FIELD_ENCRYPTION_KEY"
    monkeypatch.delenv("FIELD_ENCRYPTION_KEY")
    assert secrets_check.key_source() == "SECRET_KEY (FIELD_ENCRYPTION_KEY is not set)"
    monkeypatch.delenv("SECRET_KEY")
    assert "secret_key (neither FIELD_ENCRYPTION_KEY nor SECRET_KEY is set)" in secrets_check.key_source()
