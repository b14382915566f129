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
import re
import socket
import ssl
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network
from typing import Any
from urllib.parse import urlsplit

import httpcore
import httpx

from toolsets.base import ToolFailure

IPAddress = IPv4Address | IPv6Address
# (host, port) → the addresses it resolves to. Called in a thread.
Resolver = Callable[[str, int], Iterable[str]]
# (address, port) → why the address may not be connected to, or None when it may.
AddressCheck = Callable[[IPAddress, int], str | None]

DEFAULT_PORTS = {"http": 80, "https": 443}


def system_resolver(host: str, port: int) -> list[str]:
    return [str(info[4][0]) for info in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)]


# --- Addresses ---------------------------------------------------------------------------------

_CGNAT = IPv4Network("100.64.0.0/10")
_BENCHMARKING = IPv4Network("198.18.0.0/15")
_NAT64 = IPv6Network("64:ff9b::/96")
_NAT64_LOCAL = IPv6Network("64:ff9b:1::/48")
_IPV4_COMPATIBLE = IPv6Network("::/96")
_PRIVATE = [IPv4Network(net) for net in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16")] + [IPv6Network("fc00::/7")]


def blocked_reason(address: IPAddress) -> str | None:
    """Why `address` must not be connected to (read after "… is"), or None for a public address.

    `is_global` alone is not enough on Python 3.12: it calls 6to4 (2002::/16) and site-local
    (fec0::/10) addresses global, so those and every other IPv6 form that embeds an IPv4 address
    are checked explicitly."""
    if address.is_unspecified:
        return "an unspecified address"
    if address.is_loopback:
        return "a loopback address"
    if isinstance(address, IPv6Address):
        for embedded, form in _embedded_ipv4(address):
            reason = blocked_reason(embedded)
            if reason:
                return f"{form} {embedded}, {reason}"
    if address.is_link_local:
        if address == IPv4Address("169.254.169.254"):
            return "a link-local address (the cloud metadata service)"
        return "a link-local address"
    if address.is_multicast:
        return "a multicast address"
    if address in _CGNAT:
        return "a shared (carrier-grade NAT) address"
    if address in _BENCHMARKING:
        return "a benchmarking address"
    if isinstance(address, IPv6Address) and address.is_site_local:
        return "a site-local address"
    if address in _NAT64_LOCAL:
        return "a local-use NAT64 address"
    if any(address in network for network in _PRIVATE):
        return "a private address"
    if address.is_reserved:
        return "a reserved address"
    if address.is_private or not address.is_global:
        return "not a public address"
    return None


def _embedded_ipv4(address: IPv6Address) -> list[tuple[IPv4Address, str]]:
    found: list[tuple[IPv4Address, str]] = []
    if address.ipv4_mapped is not None:
        found.append((address.ipv4_mapped, "an IPv4-mapped form of"))
    if address.sixtofour is not None:
        found.append((address.sixtofour, "a 6to4 form of"))
    if address.teredo is not None:
        server, client = address.teredo
        found += [(server, "a Teredo form of"), (client, "a Teredo form of")]
    if address in _NAT64:
        found.append((IPv4Address(int(address) & 0xFFFFFFFF), "a NAT64 form of"))
    elif address in _IPV4_COMPATIBLE:
        found.append((IPv4Address(int(address) & 0xFFFFFFFF), "an IPv4-compatible form of"))
    return found


def default_check(address: IPAddress, port: int) -> str | None:
    return blocked_reason(address)


_NUMBER = re.compile(r"[0-9]+|0[xX][0-9a-fA-F]*")


def parse_ip_host(host: str) -> IPAddress | None:
    """The address a numeric host means, or None when the host is a name.

    Reads IPv4 the way inet_aton and browsers do: 1 to 4 parts, each decimal, octal (leading 0)
    or hex (0x), the last part filling the remaining bytes, so `127.1`, `2130706433`,
    `0x7f.0.0.1` and `0177.0.0.1` are all 127.0.0.1. Raises ValueError for a host that ends in
    a number but is no valid address (`1.2.3.4.5`, `256.0.0.1`)."""
    if ":" in host:
        return ipaddress.ip_address(host.removeprefix("[").removesuffix("]"))
    labels = host.split(".")
    if len(labels) > 1 and labels[-1] == "":
        labels.pop()
    if not _NUMBER.fullmatch(labels[-1]):
        return None
    if len(labels) > 4 or not all(_NUMBER.fullmatch(label) for label in labels):
        raise ValueError(f"{host} is not a valid IPv4 address")
    numbers = [_parse_number(label) for label in labels]
    *head, last = numbers
    if any(n > 255 for n in head) or last >= 256 ** (5 - len(numbers)):
        raise ValueError(f"{host} is not a valid IPv4 address")
    value = sum(n << (8 * (3 - i)) for i, n in enumerate(head)) + last
    return IPv4Address(value)


def _parse_number(label: str) -> int:
    if label[:2].lower() == "0x":
        return int(label[2:] or "0", 16)
    if len(label) > 1 and label.startswith("0"):
        return int(label[1:], 8)  # ValueError for 08 or 09, as inet_aton refuses them
    return int(label)


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
