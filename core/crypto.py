"""Encryption at rest for API keys, and the masked form they are shown in."""

from __future__ import annotations

import base64
import hashlib
from functools import cache
from typing import Any

from cryptography.fernet import Fernet, InvalidToken
from django.conf import settings
from django.db import models

from . import redact

PREFIX = "fernet:"


@cache
def _fernet(key: str) -> Fernet:
    digest = hashlib.sha256(key.encode()).digest()
    return Fernet(base64.urlsafe_b64encode(digest))


def encrypt(plaintext: str) -> str:
    if not plaintext:
        return ""
    return PREFIX + _fernet(settings.FIELD_ENCRYPTION_KEY).encrypt(plaintext.encode()).decode()


def decrypt(stored: str) -> str:
    if not stored:
        return ""
    if not stored.startswith(PREFIX):
        raise ValueError("Stored secret is not encrypted")
    try:
        plaintext = _fernet(settings.FIELD_ENCRYPTION_KEY).decrypt(stored.removeprefix(PREFIX).encode()).decode()
    except InvalidToken:
        raise ValueError("Stored secret cannot be decrypted with FIELD_ENCRYPTION_KEY") from None
    # Whatever this process may now echo by accident (a provider's error quoting the key) is
    # redacted from then on.
    redact.register(plaintext)
    return plaintext


def mask(plaintext: str) -> str:
    """`••••1a2b`: enough to recognise a key, never enough to use it."""
    if not plaintext:
        return ""
    return "••••" + plaintext[-4:] if len(plaintext) > 8 else "••••"


class EncryptedTextField(models.TextField):
    """Holds plaintext in Python and Fernet ciphertext in the database."""

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> str:
        return decrypt(value) if value else ""

    def get_prep_value(self, value: Any) -> Any:
        value = super().get_prep_value(value)
        if value:
            redact.register(value)
        return encrypt(value) if value else ""
