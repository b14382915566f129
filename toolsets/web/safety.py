"""Fetching a URL a model chose without letting it reach our own network (SSRF).

1. Only http(s) URLs without credentials. A numeric host in any form a resolver accepts
   (`2130706433`, `0x7f.1`, `0177.0.0.1`, `127.1`, `0`) is read as the address it means.
2. The host is resolved once, and every address it resolves to must be allowed by an
   `AddressCheck` (default: `blocked_reason`, public addresses only); one bad address refuses
   the whole host.
3. The connection goes to a checked address and nowhere else (`PinnedTransport`), so a second
   DNS answer cannot swap in a private address (DNS rebinding).

Redirects are never followed by httpx: the caller passes every hop through
`check_destination` again.
"""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import socket
import ssl
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv6Address
from typing import Any
from urllib.parse import urlsplit

import httpcore
import httpx

from core.addresses import blocked_reason, parse_ip_host
from toolsets.base import ToolFailure

IPAddress = IPv4Address | IPv6Address
# Which addresses are public (`blocked_reason`) and what a numeric host means (`parse_ip_host`)
# live in core.addresses: the sandbox's network proxy (sandbox/netproxy.py) checks the same way.
__all__ = ["blocked_reason", "parse_ip_host"]
# (host, port) → the addresses it resolves to. Called in a thread.
Resolver = Callable[[str, int], Iterable[str]]
# (address, port) → why the address may not be connected to, or None when it may.
AddressCheck = Callable[[IPAddress, int], str | None]

DEFAULT_PORTS = {"http": 80, "https": 443}


def system_resolver(host: str, port: int) -> list[str]:
    return [str(info[4][0]) for info in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)]


# --- Addresses ---------------------------------------------------------------------------------


def default_check(address: IPAddress, port: int) -> str | None:
    return blocked_reason(address)


# --- URLs --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Destination:
    """A checked hop: the URL to request and the only addresses it may be fetched from."""

    url: httpx.URL
    host: str  # as httpcore dials it: ASCII (IDNA), IPv6 without brackets
    port: int
    addresses: tuple[IPAddress, ...]


def parse_url(raw: str) -> httpx.URL:
    """Parses an http(s) URL without credentials, with a numeric host rewritten to the address
    it means. Raises ToolFailure(validation_error) otherwise."""
    text = raw.strip()
    try:
        url = httpx.URL(_with_numeric_host_normalised(text))
    except (httpx.InvalidURL, ValueError) as exc:
        raise ToolFailure(f"Not a valid URL: {text[:200]!r} ({exc})", error_type="validation_error") from None
    if url.scheme not in DEFAULT_PORTS:
        shown = f"{url.scheme}: URLs" if url.scheme else "URLs without a scheme"
        raise ToolFailure(f"Only http and https URLs can be fetched, not {shown}.", error_type="validation_error")
    if url.userinfo:
        raise ToolFailure("URLs with a user name or password are not fetched.", error_type="validation_error")
    if not url.raw_host:
        raise ToolFailure(f"The URL {text[:200]!r} has no host.", error_type="validation_error")
    if url.port is not None and not 0 < url.port < 65536:
        raise ToolFailure(f"Port {url.port} is out of range.", error_type="validation_error")
    return url


def _with_numeric_host_normalised(text: str) -> str:
    # httpx refuses some numeric hosts (0177.0.0.1) and passes others on as names (0x7f.1), so
    # they are rewritten to the dotted address first. check_destination reads the host httpx
    # settled on again, so a disagreement between the two parsers cannot skip the check.
    parts = urlsplit(text)
    host = parts.hostname
    if not host or ":" in host:
        return text
    address = parse_ip_host(host)
    if address is None or str(address) == host:
        return text
    userinfo, at, hostport = parts.netloc.rpartition("@")
    port = hostport.rpartition(":")[2] if ":" in hostport else ""
    netloc = f"{userinfo}{at}{address}" + (f":{port}" if port else "")
    return parts._replace(netloc=netloc).geturl()


async def check_destination(
    raw_url: str, *, resolver: Resolver = system_resolver, check: AddressCheck = default_check
) -> Destination:
    """Validates one hop: scheme, credentials, and every address the host resolves to.

    Raises ToolFailure: validation_error for a malformed URL, permission_denied for a blocked
    address."""
    url = parse_url(raw_url)
    host = url.raw_host.decode("ascii")
    port = url.port or DEFAULT_PORTS[url.scheme]
    try:
        literal = parse_ip_host(host)
    except ValueError as exc:
        raise ToolFailure(str(exc), error_type="validation_error") from None
    if literal is not None:
        addresses = [literal]
    else:
        addresses = await _resolve(resolver, host, port)
    for address in addresses:
        reason = check(address, port)
        if reason:
            shown = f"{address} is {reason}" if literal else f"{host} resolves to {address}, which is {reason}"
            raise ToolFailure(f"Blocked: {shown}.", error_type="permission_denied")
    return Destination(url=url, host=host, port=port, addresses=tuple(addresses))


async def _resolve(resolver: Resolver, host: str, port: int) -> list[IPAddress]:
    try:
        found = await asyncio.to_thread(lambda: list(resolver(host, port)))
    except socket.gaierror as exc:
        raise ToolFailure(
            f"Could not resolve {host}: {exc.strerror or exc}", retryable=exc.errno == socket.EAI_AGAIN
        ) from None
    addresses: list[IPAddress] = []
    for text in found:
        try:
            address = ipaddress.ip_address(text)
        except ValueError:
            raise ToolFailure(f"{host} resolved to something that is not an address: {text!r}") from None
        if address not in addresses:
            addresses.append(address)
    if not addresses:
        raise ToolFailure(f"{host} has no addresses.")
    return addresses


# --- The pinned connection ---------------------------------------------------------------------
#
# httpx keeps the URL as given, so the Host header, TLS SNI and certificate verification all use
# the original hostname; only the TCP connection is redirected. httpcore opens connections
# through a "network backend" (`connect_tcp(host, port)`), which httpx does not let callers
# choose: PinnedTransport therefore swaps the connection pool httpx built for an identical one
# whose backend is PinnedBackend, which dials the checked addresses instead of resolving the
# host again. Everything else (request and response mapping, exception mapping, decoding) stays
# httpx's own. The tests assert that every dial goes through this backend.


class PinnedBackend(httpcore.AsyncNetworkBackend):
    """Dials a Destination's checked addresses, in order, and refuses any other host."""

    def __init__(self, destination: Destination, inner: httpcore.AsyncNetworkBackend | None = None) -> None:
        self.destination = destination
        self.inner = inner or httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's interface
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        if (host, port) != (self.destination.host, self.destination.port):
            raise httpcore.ConnectError(f"{host}:{port} is not the checked destination")
        error: Exception | None = None
        for address in self.destination.addresses:
            try:
                return await self.inner.connect_tcp(
                    str(address), port, timeout=timeout, local_address=local_address, socket_options=socket_options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                error = exc
        assert error is not None  # a Destination has at least one address
        raise error

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's interface
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("Unix sockets are not fetched")

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)


@functools.cache
def _default_ssl_context() -> ssl.SSLContext:
    # Loading the CA bundle takes tens of milliseconds; one context serves every connection.
    return httpx.create_ssl_context(trust_env=False)


class PinnedTransport(httpx.AsyncHTTPTransport):
    """An httpx transport that connects only to a checked Destination (see above)."""

    def __init__(
        self,
        destination: Destination,
        *,
        ssl_context: ssl.SSLContext | None = None,
        network_backend: httpcore.AsyncNetworkBackend | None = None,
    ) -> None:
        ssl_context = ssl_context or _default_ssl_context()
        super().__init__(verify=ssl_context, trust_env=False)
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=ssl_context,
            http1=True,
            http2=False,
            network_backend=PinnedBackend(destination, network_backend),
        )
