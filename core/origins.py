"""Websockets carry no CSRF token, so the Origin a browser sends is what tells Tessera's own
pages from another site's: a socket is accepted only from the origin it was opened on — scheme,
host and port — or from one listed in CSRF_TRUSTED_ORIGINS (Django's rule for unsafe requests).

Channels' `AllowedHostsOriginValidator` compares the host alone: a page on another port of the
same host, or plain http where the site is https, passed. Behind a reverse proxy in
TESSERA_TRUSTED_PROXIES, the scheme the browser used comes from its `X-Forwarded-Proto`.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from channels.security.websocket import WebsocketDenier
from django.conf import settings
from django.http.request import split_domain_port, validate_host

from .http import is_trusted_proxy

DEFAULT_PORTS = {"http": 80, "https": 443}
Origin = tuple[str, str, int]  # scheme, host, port


class SameOriginValidator:
    def __init__(self, application: Any) -> None:
        self.application = application

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        if scope["type"] == "websocket" and not allowed(scope):
            return await WebsocketDenier()(scope, receive, send)
        return await self.application(scope, receive, send)


def allowed(scope: dict[str, Any]) -> bool:
    headers = _headers(scope)
    origin = _parse(headers.get("origin", ""))
    if origin is None:
        return False  # browsers always send one with a websocket; without it nothing is known
    own = _own_origin(scope, headers)
    if own is not None and origin == own:
        return True
    return any(_matches(origin, trusted) for trusted in settings.CSRF_TRUSTED_ORIGINS)


def _headers(scope: dict[str, Any]) -> dict[str, str]:
    found: dict[str, str] = {}
    for name, value in scope.get("headers") or []:
        key = name.decode("latin-1").lower()
        if key not in found:  # a repeated Origin or Host is not believed twice
            found[key] = value.decode("latin-1")
        elif key in ("origin", "host"):
            found[key] = ""
    return found


def _parse(value: str) -> Origin | None:
    try:
        parts = urlsplit(value.strip())
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS or not parts.hostname or parts.path not in ("", "/"):
        return None
    return scheme, parts.hostname.lower(), port or DEFAULT_PORTS[scheme]


def _own_origin(scope: dict[str, Any], headers: dict[str, str]) -> Origin | None:
    """The origin the socket was opened on: the Host header (if it is an allowed host) with the
    scheme of the connection, or the one a trusted proxy says the browser used."""
    host = headers.get("host", "")
    domain, port = split_domain_port(host)
    if not domain or not validate_host(domain, settings.ALLOWED_HOSTS):
        return None
    scheme = "https" if scope.get("scheme") in ("wss", "https") else "http"
    client = scope.get("client") or ("", 0)
    forwarded = headers.get("x-forwarded-proto", "").split(",")[0].strip().lower()
    if forwarded in DEFAULT_PORTS and is_trusted_proxy(str(client[0])):
        scheme = forwarded
    try:
        number = int(port) if port else DEFAULT_PORTS[scheme]
    except ValueError:
        return None
    return scheme, domain.strip("[]"), number


def _matches(origin: Origin, trusted: str) -> bool:
    """CSRF_TRUSTED_ORIGINS's rule: the same scheme and port, and the host itself or, for
    `https://*.example.com`, any subdomain of it."""
    scheme, _, rest = trusted.partition("://")
    wildcard = rest.startswith("*.")
    parsed = _parse(f"{scheme}://{rest[2:] if wildcard else rest}")
    if parsed is None or (parsed[0], parsed[2]) != (origin[0], origin[2]):
        return False
    return origin[1] == parsed[1] or (wildcard and origin[1].endswith("." + parsed[1]))
