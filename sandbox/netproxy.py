"""The network a sandbox may reach: nothing, unless an admin lists hosts
(TESSERA_SANDBOX_ALLOWED_HOSTS). A sandbox has a network namespace of its own with only a
loopback, so no packet of its leaves it; the one way out is this proxy, which runs in the
sandbox worker (outside the jail) and listens on a Unix socket bound into the jail. Inside, the
kernel relays 127.0.0.1:3128 to that socket and sets HTTP(S)_PROXY (sandbox/kernel.py), so
ordinary clients (requests, urllib, pandas.read_csv of a URL, pip would if it were there) use it.

Per connection the proxy reads one request — `CONNECT host:port` (HTTPS, any TCP) or a plain
HTTP request in absolute form — and refuses it (403, the reason in the body) unless:
- the host is on the list (`name`, or `*.name` for its subdomains; a `:port` or the default
  ports 80 and 443);
- every address the host resolves to is public, by the web tool's own checks (core.addresses):
  a listed name that resolves to a private, loopback or metadata address is refused, and an
  address literal must itself be listed and public;
- the connection then goes to a checked address, so a second DNS answer cannot swap one in.
Connections per session, bytes and idle time per connection are bounded.
"""

from __future__ import annotations

import logging
import os
import re
import selectors
import socket
import threading
from collections.abc import Callable, Iterable
from pathlib import Path

from core.addresses import IPAddress, blocked_reason, parse_ip_host

log = logging.getLogger(__name__)
DEFAULT_PORTS: tuple[int, ...] = (80, 443)
HEAD_BYTES = 16 * 1024
HEAD_TIMEOUT_S = 10.0
CONNECT_TIMEOUT_S = 10.0
IDLE_TIMEOUT_S = 120.0
MAX_BYTES = 256 * 1024 * 1024
MAX_CONNECTIONS = 16
_HOST = re.compile(r"(\*\.)?[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*")

Resolver = Callable[[str, int], Iterable[str]]
AddressCheck = Callable[[IPAddress, int], str | None]


def _system_resolver(host: str, port: int) -> list[str]:
    return [str(info[4][0]) for info in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)]


def _public_only(address: IPAddress, port: int) -> str | None:
    return blocked_reason(address)


def parse_rule(rule: str) -> tuple[str, tuple[int, ...]]:
    """An allow-list entry as (host pattern, ports); ValueError for one that is not a host, or
    that names a private address (never allowed, whatever the list says)."""
    text = rule.strip().lower().rstrip(".")
    host = text
    ports: tuple[int, ...] = DEFAULT_PORTS
    if text.count(":") == 1:
        host, _, port = text.partition(":")
        if not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"{rule!r}: not a port")
        ports = (int(port),)
    try:
        literal = parse_ip_host(host.removeprefix("*."))
    except ValueError:
        literal = None
        raise ValueError(f"{rule!r}: not a host name") from None
    if literal is not None:
        reason = blocked_reason(literal)
        if reason or host.startswith("*."):
            raise ValueError(f"{rule!r}: is {reason or 'an address with a wildcard'}; only public hosts may be allowed")
        return str(literal), ports
    if not _HOST.fullmatch(host):
        raise ValueError(f"{rule!r}: not a host name (a name, *.name for its subdomains, :port if not 80/443)")
    return host, ports


def allowed(host: str, port: int, rules: Iterable[tuple[str, tuple[int, ...]]]) -> bool:
    name = host.lower().rstrip(".")
    for pattern, ports in rules:
        if port not in ports:
            continue
        if pattern.startswith("*.") and name.endswith(pattern[1:]) and name != pattern[2:]:
            return True
        if name == pattern:
            return True
    return False


class Refused(Exception):
    pass


class NetProxy:
    """One session's proxy, on `path` (bound into its jail). `rules` may change between calls
    (an admin edits the list): each connection reads them as they are then."""

    def __init__(
        self,
        path: Path,
        rules: list[tuple[str, tuple[int, ...]]],
        *,
        resolver: Resolver = _system_resolver,
        check: AddressCheck = _public_only,
    ) -> None:
        self.path, self.rules, self.resolver, self.check = path, rules, resolver, check
        self.open = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(str(path))
        # The jail's user may be another host user (jail.host_ids): the folder holding the socket
        # is the session's own, so the socket itself may be connectable by anyone.
        os.chmod(path, 0o666)
        self.listener.listen(32)
        self.closed = False
        threading.Thread(target=self._serve, daemon=True, name=f"sandbox-net-{path.parent.name}").start()

    def close(self) -> None:
        self.closed = True
        try:
            self.listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.listener.close()
        self.path.unlink(missing_ok=True)

    def _serve(self) -> None:
        while not self.closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if not self.open.acquire(blocking=False):
                _answer(client, 429, "Too many connections from this sandbox at once.")
                client.close()
                continue
            threading.Thread(target=self._handle, args=(client,), daemon=True).start()

    def _handle(self, client: socket.socket) -> None:
        upstream: socket.socket | None = None
        try:
            client.settimeout(HEAD_TIMEOUT_S)
            head = _read_head(client)
            method, host, port, forward = _request(head)
            upstream = self._connect(host, port)
            if method == "CONNECT":
                client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            else:
                upstream.sendall(forward)
            _relay(client, upstream)
        except Refused as exc:
            _answer(client, 403, str(exc))
        except (OSError, ValueError) as exc:
            log.debug("sandbox proxy connection ended: %s", exc)
        finally:
            for sock in (client, upstream):
                if sock is not None:
                    sock.close()
            self.open.release()

    def _connect(self, host: str, port: int) -> socket.socket:
        if not allowed(host, port, self.rules):
            raise Refused(f"{host}:{port} is not on this Tessera's list of hosts code may reach.")
        try:
            literal = parse_ip_host(host)
        except ValueError as exc:
            raise Refused(f"{host} is not a valid address.") from exc
        try:
            found = [literal] if literal is not None else [parse_ip_host(a) for a in self.resolver(host, port)]
        except (OSError, ValueError) as exc:
            raise Refused(f"{host} could not be resolved.") from exc
        addresses = [a for a in found if a is not None]
        if not addresses:
            raise Refused(f"{host} could not be resolved.")
        for address in addresses:
            reason = self.check(address, port)
            if reason:
                raise Refused(f"{host} resolves to {address}, {reason}: refused.")
        error: OSError | None = None
        for address in addresses:
            try:
                return socket.create_connection((str(address), port), timeout=CONNECT_TIMEOUT_S)
            except OSError as exc:
                error = exc
        raise Refused(f"{host}:{port} could not be reached ({error}).")


def _read_head(client: socket.socket) -> bytes:
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = client.recv(4096)
        if not chunk:
            raise ValueError("closed before its request")
        head += chunk
        if len(head) > HEAD_BYTES:
            raise Refused("The request's head is too long.")
    return head


def _request(head: bytes) -> tuple[str, str, int, bytes]:
    """(method, host, port, what to send upstream) of a proxy request."""
    line, _, rest = head.partition(b"\r\n")
    parts = line.decode("latin-1").split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise Refused("Not an HTTP proxy request.")
    method, target, version = parts
    if method == "CONNECT":
        name, _, number = target.rpartition(":")
        name = name.removeprefix("[").removesuffix("]")
        if not name or not number.isdigit():
            raise Refused("CONNECT needs host:port.")
        return method, name, int(number), b""
    match = re.fullmatch(r"http://([^/?#]+)(.*)", target, re.IGNORECASE)
    if not match:
        raise Refused("Only CONNECT and http:// requests go through this proxy.")
    authority, path = match[1], match[2] or "/"
    if "@" in authority:
        raise Refused("Credentials in the URL are not passed on.")
    host, port = authority, 80
    if re.search(r":\d+$", authority):
        host, _, digits = authority.rpartition(":")
        port = int(digits)
    host = host.removeprefix("[").removesuffix("]")
    return method, host, port, f"{method} {path} {version}\r\n".encode("latin-1") + rest


def _answer(client: socket.socket, status: int, text: str) -> None:
    body = (text + "\n").encode()
    reason = {403: "Forbidden", 429: "Too Many Requests"}.get(status, "Error")
    head = f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {len(body)}\r\n"
    try:
        client.sendall(head.encode() + b"Connection: close\r\n\r\n" + body)
    except OSError:
        pass


def _relay(a: socket.socket, b: socket.socket) -> None:
    a.settimeout(None)
    b.settimeout(None)
    moved = 0
    with selectors.DefaultSelector() as selector:
        selector.register(a, selectors.EVENT_READ, b)
        selector.register(b, selectors.EVENT_READ, a)
        while True:
            ready = selector.select(IDLE_TIMEOUT_S)
            if not ready:
                return
            for key, _ in ready:
                source = key.fileobj
                assert isinstance(source, socket.socket)
                data = source.recv(65536)
                if not data:
                    return
                moved += len(data)
                if moved > MAX_BYTES:
                    return
                key.data.sendall(data)
