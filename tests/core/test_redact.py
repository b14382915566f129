"""One redaction function: every known secret and credential-shaped token leaves error texts."""

from __future__ import annotations

import logging
import sys
from typing import Any

from core import redact


def test_registered_secret_is_removed_wherever_it_appears() -> None:
    key = "zq-provider-key-7f3a91c2d4e5"
    redact.register(key)

    text = f'{{"error": {{"message": "Invalid request for api key {key}"}}}} and again:{key}!'

    cleaned = redact.redact(text)
    assert key not in cleaned and cleaned.count(redact.REDACTED) == 2


def test_url_encoded_form_is_removed_too() -> None:
    key = "k3y/with+odd=chars&more"
    redact.register(key)
    assert "k3y%2Fwith%2Bodd%3Dchars%26more" not in redact.redact("url?key=k3y%2Fwith%2Bodd%3Dchars%26more")


def test_longest_secret_wins_when_one_contains_another() -> None:
    redact.register("abcdefgh12", "abcdefgh12345678")
    assert redact.redact("x abcdefgh12345678 y") == f"x {redact.REDACTED} y"


def test_short_values_are_never_treated_as_secrets() -> None:
    redact.register("abc", "", None)
    assert redact.redact("abc is fine") == "abc is fine"


def test_credential_shaped_tokens_are_removed_even_when_unknown() -> None:
    for token in ("sk-proj-AbCdEf0123456789XyZ", "tsk_0123456789abcdef0123", "AIzaSyA-0123456789abcdefghijklmnopqrstu"):
        assert token not in redact.redact(f"failed with {token}."), token
    assert "0123456789abcdefXYZ" not in redact.redact("Authorization: Bearer 0123456789abcdefXYZ")
    # Ordinary words that merely start the same way stay.
    assert redact.redact("the task-list and skip-links") == "the task-list and skip-links"


def test_environment_credentials_are_registered() -> None:
    redact.register_environment(
        {
            "MYPROVIDER_API_KEY": "env-key-0123456789",
            "DATABASE_URL": "postgres://app:db-pass-98765@db:5432/tessera",
            "HOME": "/root/not-a-secret",
        }
    )
    cleaned = redact.redact("env-key-0123456789 db-pass-98765 /root/not-a-secret")
    assert "env-key" not in cleaned and "db-pass" not in cleaned and "/root/not-a-secret" in cleaned


def test_redact_data_walks_nested_values() -> None:
    redact.register("nested-secret-value-1")
    data = {"a": ["nested-secret-value-1", {"b": "x nested-secret-value-1"}], "n": 3}
    assert "nested-secret" not in str(redact.redact_data(data))


def test_logging_filter_redacts_message_arguments_and_traceback() -> None:
    secret = "log-secret-0123456789"
    redact.register(secret)
    try:
        raise ValueError(f"bad key {secret}")
    except ValueError:
        record = logging.LogRecord("x", logging.ERROR, __file__, 1, "key was %s", (secret,), sys.exc_info())

    assert redact.RedactingFilter().filter(record)

    formatted = logging.Formatter().format(record)
    assert secret not in formatted and "key was" in formatted and "ValueError" in formatted


def test_many_secrets_are_removed_longest_first() -> None:
    values = [f"bulk-secret-{n:05d}-{'x' * (n % 7)}" for n in range(3000)]
    redact.register(*values, "bulk-secret-00042-", "bulk-secret-00042-xxxxxxx-and-more")
    text = " | ".join(["bulk-secret-00042-xxxxxxx-and-more", values[2999], "bulk-secret-0004", values[7] + "!"])

    assert redact.redact(text) == f"{redact.REDACTED} | {redact.REDACTED} | bulk-secret-0004 | {redact.REDACTED}!"


def test_a_very_long_secret_is_removed() -> None:
    token = "eyJ" + "a1B2c3D4" * 600  # a JWT-sized credential
    redact.register(token)
    assert redact.redact(f"token={token};") == f"token={redact.REDACTED};"


def test_binary_data_loses_known_secrets_but_never_a_chance_shape() -> None:
    known = "QmluYXJ5U2VjcmV0VmFsdWU"
    redact.register(known)
    chance = "AIza" + "B" * 40  # looks like a Google key, as random base64 sometimes does
    blob = "iVBORw0KGgo" * 10 + chance + "A" * 30
    data = {"type": "image", "data": blob, "text": chance, "blob": "x" * 70 + known}

    cleaned = redact.redact_data(data)

    assert cleaned["data"] == blob  # an image's bytes stay intact
    assert cleaned["text"] == redact.REDACTED  # the same shape in text is removed
    assert cleaned["blob"] == "x" * 70 + redact.REDACTED


def test_keys_of_json_data_are_redacted_too() -> None:
    redact.register("key-as-a-name-0001")
    assert redact.redact_data({"key-as-a-name-0001": 1}) == {redact.REDACTED: 1}


def test_settings_secrets_are_registered_wherever_they_came_from(settings: Any) -> None:
    from django.conf import settings as live

    for value in (live.SECRET_KEY, live.FIELD_ENCRYPTION_KEY):
        assert value not in redact.redact(f"leaked: {value}")


def test_encryption_and_access_keys_in_the_environment_are_registered() -> None:
    redact.register_environment(
        {
            "FIELD_ENCRYPTION_KEY": "field-key-value-0123",
            "TESSERA_FILES_S3_ACCESS_KEY_ID": "AKIAEXAMPLE0123456",
            "KEYBOARD_LAYOUT": "us-international",
        }
    )
    cleaned = redact.redact("field-key-value-0123 AKIAEXAMPLE0123456 us-international")
    assert cleaned == f"{redact.REDACTED} {redact.REDACTED} us-international"
