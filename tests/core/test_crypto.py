from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from django.db import connection

from chat.models import LLMModel
from core.crypto import decrypt, encrypt, mask

SECRET = "sk-live-abcdefghijklmnop1a2b"


def _raw_api_key(pk: int) -> str:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT api_key FROM {LLMModel._meta.db_table} WHERE id = %s", [pk])
        return str(cursor.fetchone()[0])


@pytest.mark.django_db
def test_api_key_is_stored_encrypted() -> None:
    model = LLMModel.objects.create(name="GPT", model="openai/gpt-4o", api_key=SECRET)

    raw = _raw_api_key(model.pk)

    assert raw.startswith("fernet:")
    assert SECRET not in raw


@pytest.mark.django_db
def test_api_key_reads_back_decrypted_through_the_model() -> None:
    created = LLMModel.objects.create(name="GPT", model="openai/gpt-4o", api_key=SECRET)

    assert LLMModel.objects.get(pk=created.pk).api_key == SECRET


@pytest.mark.django_db
def test_updating_the_key_re_encrypts_it() -> None:
    model = LLMModel.objects.create(name="GPT", model="openai/gpt-4o", api_key=SECRET)
    first = _raw_api_key(model.pk)

    model.api_key = "sk-other-key-9999"
    model.save()

    second = _raw_api_key(model.pk)
    assert second != first
    assert "sk-other-key-9999" not in second
    assert LLMModel.objects.get(pk=model.pk).api_key == "sk-other-key-9999"


@pytest.mark.django_db
def test_a_blank_key_is_stored_blank() -> None:
    model = LLMModel.objects.create(name="Local", model="ollama_chat/llama3.1")

    assert _raw_api_key(model.pk) == ""
    assert LLMModel.objects.get(pk=model.pk).api_key == ""


@pytest.mark.django_db
def test_a_key_cannot_be_found_by_filtering_on_its_plaintext_substring() -> None:
    LLMModel.objects.create(name="GPT", model="openai/gpt-4o", api_key=SECRET)

    with connection.cursor() as cursor:
        cursor.execute(f"SELECT COUNT(*) FROM {LLMModel._meta.db_table} WHERE api_key LIKE %s", ["%sk-live%"])
        assert cursor.fetchone()[0] == 0


def test_encryption_is_randomised() -> None:
    assert encrypt(SECRET) != encrypt(SECRET)
    assert decrypt(encrypt(SECRET)) == SECRET


def test_decrypt_refuses_plaintext_in_the_column() -> None:
    with pytest.raises(ValueError, match="not encrypted"):
        decrypt(SECRET)


def test_decrypt_with_another_key_fails_clearly(settings: Any) -> None:
    stored = encrypt(SECRET)
    settings.FIELD_ENCRYPTION_KEY = "a different key"

    with pytest.raises(ValueError, match="cannot be decrypted"):
        decrypt(stored)


def test_mask_shows_only_the_last_four_characters() -> None:
    masked = mask(SECRET)

    assert masked == "••••1a2b"
    assert SECRET[:-4] not in masked


def test_mask_hides_short_keys_entirely() -> None:
    assert mask("abcd1234") == "••••"
    assert mask("") == ""


def _store_behind_the_processs_back(table: str, column: str, pk: int, plaintext: str) -> None:
    """As another process would: the ciphertext lands in the database, this process never
    held the value."""
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {table} SET {column} = %s WHERE id = %s", [encrypt(plaintext), pk])


@pytest.mark.django_db
def test_every_stored_secret_is_registered_before_results_are_redacted() -> None:
    from django.contrib.auth import get_user_model

    from core import crypto, redact
    from toolsets.mcp.models import MCPServer, OAuthGrant

    user = get_user_model().objects.create_user("owner")
    server = MCPServer.objects.create(name="S", slug="s", url="https://mcp.example.com/mcp")
    grant = OAuthGrant.objects.create(user=user, server=server)
    model = LLMModel.objects.create(name="GPT", model="openai/gpt-4o")
    key, env, header, access = (
        "sk-elsewhere-0000111122223333",
        "env-value-only-a-worker-had",
        "hdr-token-4444555566667777",
        "oauth-access-88889999aaaa",
    )
    _store_behind_the_processs_back(LLMModel._meta.db_table, "api_key", model.pk, key)
    _store_behind_the_processs_back(MCPServer._meta.db_table, "env", server.pk, json.dumps({"TOKEN": env}))
    headers = json.dumps({"Authorization": f"Bearer {header}"})
    _store_behind_the_processs_back(MCPServer._meta.db_table, "headers", server.pk, headers)
    tokens = json.dumps({"access_token": access, "token_type": "Bearer", "scope": "read write"})
    _store_behind_the_processs_back(OAuthGrant._meta.db_table, "tokens", grant.pk, tokens)
    text = f"{key} {env} {header} {access} Bearer read write"
    assert redact.redact(text) == text.replace(key, redact.REDACTED)  # only the key's shape is known

    crypto.register_stored_secrets(force=True)

    # Each value of a document counts on its own (a server echoes one variable, or the token
    # without its scheme); the rest of the document does not.
    assert redact.redact(text) == " ".join([redact.REDACTED] * 4) + " Bearer read write"


@pytest.mark.parametrize(
    ("redis_url", "level"),
    [("unix:///nonexistent/redis.sock", "DEBUG"), ("redis://127.0.0.1:1/0", "WARNING")],
)
def test_an_announcement_nobody_can_hear_is_not_a_warning(
    redis_url: str, level: str, settings: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # `make run` saves secrets before `serve` starts the embedded Redis: no process to tell.
    from django.core.cache import cache

    from core import crypto

    def down(*args: Any, **kwargs: Any) -> None:
        raise ConnectionError("no Redis")

    settings.REDIS_URL = redis_url
    monkeypatch.setattr(cache, "incr", down)
    monkeypatch.setattr(cache, "add", down)
    with caplog.at_level(logging.DEBUG, logger="core.crypto"):
        crypto._stored_secrets_changed()
    (record,) = [r for r in caplog.records if "Could not announce" in r.getMessage()]
    assert record.levelname == level


@pytest.mark.django_db
def test_saving_a_secret_tells_every_process_to_load_them_again() -> None:
    from django.core.cache import cache

    from core import crypto

    before = cache.get(crypto.GENERATION_KEY, 0)
    LLMModel.objects.create(name="GPT", model="openai/gpt-4o", api_key=SECRET)
    assert cache.get(crypto.GENERATION_KEY) == before + 1


@pytest.mark.django_db
def test_a_value_another_key_encrypted_does_not_stop_the_others_loading(settings: Any) -> None:
    from core import crypto, redact
    from toolsets.mcp.models import MCPServer

    model = LLMModel.objects.create(name="A", model="openai/a")
    newer = LLMModel.objects.create(name="B", model="openai/b")
    server = MCPServer.objects.create(name="S", slug="s", url="https://mcp.example.com/mcp")
    settings.FIELD_ENCRYPTION_KEY = "an old key"
    _store_behind_the_processs_back(LLMModel._meta.db_table, "api_key", model.pk, "old-key-secret-000111")
    settings.FIELD_ENCRYPTION_KEY = "the current key"
    _store_behind_the_processs_back(LLMModel._meta.db_table, "api_key", newer.pk, "current-key-secret-22")
    env = json.dumps({"A": "current-env-secret-1"})
    _store_behind_the_processs_back(MCPServer._meta.db_table, "env", server.pk, env)

    crypto.register_stored_secrets(force=True)

    assert redact.redact("current-env-secret-1 current-key-secret-22") == f"{redact.REDACTED} {redact.REDACTED}"
