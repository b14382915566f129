"""URL converters for database ids.

Django's `int` converter takes any number of digits, and a 30-digit id reaches the database as an
integer it cannot hold (an OverflowError, so a 500). `<id:…>` takes what a 64-bit key can be and
turns everything else into a plain 404.
"""

from __future__ import annotations

from django.urls import register_converter


class IdConverter:
    regex = "[0-9]{1,18}"

    def to_python(self, value: str) -> int:
        return int(value)

    def to_url(self, value: int) -> str:
        return str(value)


register_converter(IdConverter, "id")


class IdOrNewConverter:
    """An id, or "new" (None) for what does not exist yet, e.g. the chat the home page creates."""

    regex = "new|[0-9]{1,18}"

    def to_python(self, value: str) -> int | None:
        return None if value == "new" else int(value)

    def to_url(self, value: int | None) -> str:
        return "new" if value is None else str(value)


register_converter(IdOrNewConverter, "id_or_new")


class TokenConverter:
    """A URL-safe secret (secrets.token_urlsafe: a webhook's key, a share's token). Anything else,
    a NUL byte among it (which PostgreSQL refuses in a query: a 500), is a plain 404."""

    regex = "[A-Za-z0-9_-]{1,100}"

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


register_converter(TokenConverter, "token")
