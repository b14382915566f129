"""Which addresses a connection a user or model chose may go to: public ones only (no loopback,
private, link-local — the cloud metadata service —, carrier-grade NAT, multicast, reserved, nor
IPv6 forms embedding one), and what a numeric host means however it is spelled. Used by the web
tool's fetches (toolsets/web/safety.py), OAuth discovery and the code sandbox's network proxy
(sandbox/netproxy.py)."""

from __future__ import annotations

import ipaddress
import re
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network

IPAddress = IPv4Address | IPv6Address

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
