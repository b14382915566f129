"""core.origins: a websocket is accepted only from the origin it was opened on (scheme, host and
port) or a trusted one."""

from __future__ import annotations

from typing import Any

import pytest

from core.origins import allowed


def scope(
    origin: str | None,
    host: str = "chat.example.com",
    scheme: str = "wss",
    client: str = "203.0.113.5",
    **headers: str,
) -> dict[str, Any]:
    raw = [(b"host", host.encode())]
    if origin is not None:
        raw.append((b"origin", origin.encode()))
    raw += [(k.replace("_", "-").encode(), v.encode()) for k, v in headers.items()]
    return {"type": "websocket", "scheme": scheme, "headers": raw, "client": (client, 40000)}


@pytest.fixture(autouse=True)
def _hosts(settings: Any) -> None:
    settings.ALLOWED_HOSTS = ["chat.example.com", "localhost"]
    settings.CSRF_TRUSTED_ORIGINS = []
    settings.TRUSTED_PROXIES = ["10.0.0.0/8"]


@pytest.mark.parametrize(
    ("origin", "host", "scheme"),
    [
        ("https://chat.example.com", "chat.example.com", "wss"),
        ("https://chat.example.com:443", "chat.example.com", "wss"),
        ("http://localhost:8000", "localhost:8000", "ws"),
        ("HTTPS://Chat.Example.com", "chat.example.com", "wss"),
    ],
)
def test_the_pages_own_origin_is_accepted(origin: str, host: str, scheme: str) -> None:
    assert allowed(scope(origin, host, scheme))


@pytest.mark.parametrize(
    ("origin", "host", "scheme"),
    [
        ("http://chat.example.com", "chat.example.com", "wss"),  # another scheme
        ("https://chat.example.com:8443", "chat.example.com", "wss"),  # another port
        ("http://localhost:9999", "localhost:8000", "ws"),  # another port of the same host
        ("http://localhost", "localhost:8000", "ws"),
        ("https://evil.example", "chat.example.com", "wss"),
        ("https://chat.example.com.evil.example", "chat.example.com", "wss"),
        ("null", "chat.example.com", "wss"),
        (None, "chat.example.com", "wss"),
        ("https://chat.example.com/path", "chat.example.com", "wss"),
        ("https://attacker.example", "attacker.example", "wss"),  # a host that is not ours
    ],
)
def test_anything_else_is_refused(origin: str | None, host: str, scheme: str) -> None:
    assert not allowed(scope(origin, host, scheme))


def test_a_trusted_proxy_says_which_scheme_the_browser_used() -> None:
    behind = scope("https://chat.example.com", scheme="ws", client="10.0.0.2", x_forwarded_proto="https")
    assert allowed(behind)
    # The same header from anyone else is not believed.
    assert not allowed(scope("https://chat.example.com", scheme="ws", x_forwarded_proto="https"))


def test_trusted_origins_follow_djangos_rule(settings: Any) -> None:
    settings.CSRF_TRUSTED_ORIGINS = ["https://chat.example.com", "https://*.corp.example"]
    assert allowed(scope("https://chat.example.com", scheme="ws", client="10.0.0.2"))
    assert allowed(scope("https://app.corp.example", scheme="ws"))
    assert not allowed(scope("http://app.corp.example", scheme="ws"))
    assert not allowed(scope("https://app.corp.example:8443", scheme="ws"))
    assert not allowed(scope("https://corp.example.evil", scheme="ws"))


def test_a_repeated_origin_header_is_refused() -> None:
    twice = scope("https://chat.example.com")
    twice["headers"].append((b"origin", b"https://chat.example.com"))
    assert not allowed(twice)
