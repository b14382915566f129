"""Request types for views behind @login_required (so `request.user` is a real User), the
address a request came from, and compressed pages."""

from __future__ import annotations

import ipaddress
from functools import cache
from typing import TYPE_CHECKING

from django.conf import settings
from django.http import HttpRequest, HttpResponseBase
from django.middleware.gzip import GZipMiddleware

if TYPE_CHECKING:
    from django.contrib.auth.models import User
    from django_htmx.middleware import HtmxDetails


class AuthedRequest(HttpRequest):
    user: User
    htmx: HtmxDetails


Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@cache
def _trusted(proxies: tuple[str, ...]) -> tuple[Network, ...]:
    return tuple(ipaddress.ip_network(proxy.strip(), strict=False) for proxy in proxies if proxy.strip())


def _ip(value: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(value.strip())
    except ValueError:
        return None


def is_trusted_proxy(address: str) -> bool:
    found = _ip(address)
    return found is not None and any(found in net for net in _trusted(tuple(settings.TRUSTED_PROXIES)))


def client_address(request: HttpRequest) -> str:
    """The client's address: the connection's, unless it comes from a proxy in TRUSTED_PROXIES,
    then the last address in X-Forwarded-For that is not one of those proxies (what a client
    writes there itself comes before what the proxies append, so it is never taken)."""
    remote = str(request.META.get("REMOTE_ADDR") or "")
    trusted = _trusted(tuple(settings.TRUSTED_PROXIES))
    found = _ip(remote)
    if found is None or not any(found in net for net in trusted):
        return remote or "unknown"
    forwarded = str(request.META.get("HTTP_X_FORWARDED_FOR") or "")
    for hop in reversed([part for part in forwarded.split(",") if part.strip()]):
        address = _ip(hop)
        if address is None:
            break  # not an address: nothing further left can be trusted
        if not any(address in net for net in trusted):
            return str(address)
    return remote


# What Tessera renders itself; static files come compressed from WhiteNoise already, and stored
# files (attachments) are sent as they are.
COMPRESSED_TYPES = ("text/html", "text/plain", "text/markdown", "application/json")


class CompressPagesMiddleware(GZipMiddleware):
    """Pages and fragments gzip-compressed for browsers that accept it: a long chat's page is a
    few hundred kB of repetitive markup, about a tenth of that compressed, and on a phone's
    connection the difference is seconds before it shows. (Django's middleware pads each
    response against BREACH, and the CSRF token in a page is masked afresh on every render.)"""

    def process_response(self, request: HttpRequest, response: HttpResponseBase) -> HttpResponseBase:
        if response.streaming or not response.get("Content-Type", "").startswith(COMPRESSED_TYPES):
            return response
        return super().process_response(request, response)
