"""Encryption at rest for API keys, and the masked form they are shown in."""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import threading
import time
from collections.abc import Callable, Iterable
from functools import cache
from pathlib import Path
from typing import Any

from cryptography.fernet import Fernet, InvalidToken
from django.conf import settings
from django.db import models
from django.db.models.functions import Cast

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


log = logging.getLogger(__name__)
SecretParts = Callable[[str], Iterable[str]]


class EncryptedTextField(models.TextField):
    """Holds plaintext in Python and Fernet ciphertext in the database.

    `secret_parts` says which parts of the plaintext are credentials when it is a document rather
    than one key (a JSON object of environment variables, an OAuth token set): each is registered
    for redaction on its own, since a server echoes one value, never the whole document."""

    def __init__(self, *args: Any, secret_parts: SecretParts | None = None, **kwargs: Any) -> None:
        self.secret_parts = secret_parts
        super().__init__(*args, **kwargs)

    def contribute_to_class(self, cls: Any, name: str, *args: Any, **kwargs: Any) -> None:
        super().contribute_to_class(cls, name, *args, **kwargs)
        if not cls._meta.abstract:
            # Every process learns of a new or changed secret (see register_stored_secrets).
            models.signals.post_save.connect(_stored_secrets_changed, sender=cls, weak=False, dispatch_uid=f"{cls}")

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> str:
        plaintext = decrypt(value) if value else ""
        self._register_parts(plaintext)
        return plaintext

    def get_prep_value(self, value: Any) -> Any:
        value = super().get_prep_value(value)
        if value:
            redact.register(value)
            self._register_parts(value)
        return encrypt(value) if value else ""

    def _register_parts(self, plaintext: str) -> None:
        if plaintext and self.secret_parts is not None:
            redact.register(*self.secret_parts(plaintext))


def json_values(plaintext: str) -> list[str]:
    """Every string value of a JSON object (header values, environment variables)."""
    return _strings(_json(plaintext))


def header_values(plaintext: str) -> list[str]:
    """Header values, and the credential inside one that names its scheme (`Bearer <token>`):
    a server that echoes the token echoes it without the scheme."""
    found = []
    for value in json_values(plaintext):
        found.append(value)
        scheme, _, credential = value.strip().partition(" ")
        if credential and scheme.isalpha():
            found.append(credential.strip())
    return found


def json_keys(*names: str) -> SecretParts:
    """The values of these keys of a JSON object, wherever they are nested (OAuth tokens)."""

    def parts(plaintext: str) -> list[str]:
        found: list[str] = []

        def walk(value: Any) -> None:
            if isinstance(value, dict):
                for key, item in value.items():
                    if key in names and isinstance(item, str):
                        found.append(item)
                    walk(item)
            elif isinstance(value, list):
                for item in value:
                    walk(item)

        walk(_json(plaintext))
        return found

    return parts


def _json(plaintext: str) -> Any:
    try:
        return json.loads(plaintext)
    except ValueError:
        return None


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for item in value.values() for s in _strings(item)]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    return []


# --- Every stored secret, in every process ------------------------------------------------------
# A process registers a secret when it decrypts it; a tool's result, though, comes from outside
# (an MCP server that holds another user's token, a page that quotes a key), and may carry a
# secret this process never decrypted. Before redacting results, a process loads every stored
# secret once, and again whenever any process saved one (a counter in the shared cache).

GENERATION_KEY = "tessera:secrets:generation"
CHECK_EVERY_S = 5.0
_stored_lock = threading.Lock()
_stored: dict[str, Any] = {"generation": None, "checked": 0.0}


def register_stored_secrets(*, force: bool = False) -> None:
    """Registers every secret stored in any encrypted field (blocking: database and cache)."""
    from django.core.cache import cache as shared

    now = time.monotonic()
    if not force and now - _stored["checked"] < CHECK_EVERY_S:
        return
    with _stored_lock:
        if not force and now - _stored["checked"] < CHECK_EVERY_S:
            return
        generation = shared.get(GENERATION_KEY, 0)
        if force or generation != _stored["generation"]:
            for model, field in encrypted_fields():
                _register_column(model, field)
            _stored["generation"] = generation
        _stored["checked"] = time.monotonic()


def encrypted_fields() -> list[tuple[Any, EncryptedTextField]]:
    from django.apps import apps

    return [
        (model, field)
        for model in apps.get_models()
        for field in model._meta.concrete_fields
        if isinstance(field, EncryptedTextField)
    ]


def _register_column(model: Any, field: EncryptedTextField) -> None:
    # The ciphertexts as stored (a Cast has no decrypting converter), each decrypted on its own:
    # one value encrypted with another key costs that value, not the column.
    stored = model._default_manager.exclude(**{field.name: ""}).values_list(Cast(field.name, models.TextField()))
    failed = 0
    for (ciphertext,) in stored.iterator():
        try:
            field._register_parts(decrypt(ciphertext))
        except ValueError:  # nobody can use it, nor leak it
            failed += 1
    if failed:
        log.warning("%d stored secrets of %s.%s cannot be decrypted", failed, model.__name__, field.name)


def _stored_secrets_changed(**_: Any) -> None:
    from django.core.cache import cache as shared

    try:
        try:
            shared.incr(GENERATION_KEY)
        except ValueError:  # not there yet
            shared.add(GENERATION_KEY, 1, timeout=None)
    except Exception as exc:  # the cache is advice here: the saving process registered the value itself
        # One line, no traceback. The embedded Redis not started yet (`make run`'s set-up before
        # `serve`) means no other process is running to be told: nothing worth a warning.
        url = str(settings.REDIS_URL)
        embedded_down = url.startswith("unix://") and not Path(url.removeprefix("unix://").split("?")[0]).exists()
        log.log(
            logging.DEBUG if embedded_down else logging.WARNING,
            "Could not announce a changed secret to other processes: %s",
            exc,
        )
