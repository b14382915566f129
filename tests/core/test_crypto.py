from __future__ import annotations

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
