"""The web fetch tool, above all its SSRF defences.

There is no internet here, and the tests do not need one. Most tests run the production policy
unchanged (`default_check`: public addresses only) and replace only what lies around it:

- `FakeDNS` answers for made-up names such as `public.test` and records every lookup;
- `FakeInternet` is the network below the pinned connection: it records every (address, port)
  dialled and carries some public addresses to local test servers, which is how a page on
  "93.184.215.14" is served from 127.0.0.1. It can also reach the servers' own loopback
  addresses, so a test that says "refused" would see the secret served if the check were gone.

A few tests dial for real (no FakeInternet) to prove the production connector works; they use a
policy that lets exactly one loopback port through and is otherwise the production one.
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import socket
import ssl
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpcore
import pytest

from toolsets.base import ToolContext, ToolFailure
from toolsets.web import toolset
from toolsets.web.safety import (
    IPAddress,
    PinnedBackend,
    blocked_reason,
    check_destination,
    parse_ip_host,
    system_resolver,
)
from toolsets.web.tools import MAX_CHARS, ReadableHTML, fetch, fetch_page

PUBLIC = "93.184.215.14"
PUBLIC_2 = "93.184.215.15"
PUBLIC_V6 = "2606:4700:4700::1111"

# --- Test doubles ------------------------------------------------------------------------------

Route = Callable[[BaseHTTPRequestHandler], None]


def respond(status: int, body: bytes | str = b"", content_type: str = "text/plain", **headers: str) -> Route:
    data = body.encode() if isinstance(body, str) else body

    def route(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(status)
        handler.send_header("Content-Type", content_type)
        handler.send_header("Content-Length", str(len(data)))
        for name, value in headers.items():
            handler.send_header(name.replace("_", "-"), value)
        handler.end_headers()
        handler.wfile.write(data)

    return route


def redirect(location: str, status: int = 302) -> Route:
    return respond(status, b"", "text/plain", Location=location)


class Server:
    """An HTTP(S) server on 127.0.0.1 in a thread; records every request as (path, Host header)."""

    def __init__(self, routes: dict[str, Route], tls: ssl.SSLContext | None = None) -> None:
        self.routes = routes
        self.hits: list[tuple[str, str]] = []
        self.server_names: list[str | None] = []
        self.released = threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                outer.hits.append((self.path, self.headers.get("Host", "")))
                route = outer.routes.get(self.path) or outer.routes.get("*") or respond(404, "no such page")
                route(self)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if tls is not None:
            tls.sni_callback = lambda sock, name, ctx: self.server_names.append(name)
            self.httpd.socket = tls.wrap_socket(self.httpd.socket, server_side=True)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.released.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def serve() -> Iterator[Callable[..., Server]]:
    servers: list[Server] = []

    def start(routes: dict[str, Route], tls: ssl.SSLContext | None = None) -> Server:
        servers.append(Server(routes, tls))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


@pytest.fixture
def secret(serve: Callable[..., Server]) -> Server:
    """What an attacker is after: a service on loopback that must never be reached."""
    return serve({"*": respond(200, "the secret")})


class FakeDNS:
    """Answers from a table; `localhost` goes to the system resolver (/etc/hosts)."""

    def __init__(self, records: dict[str, list[str]] | None = None) -> None:
        self.records = records or {}
        self.calls: list[tuple[str, int]] = []

    def __call__(self, host: str, port: int) -> list[str]:
        self.calls.append((host, port))
        return self.lookup(host, port)

    def lookup(self, host: str, port: int) -> list[str]:
        if host == "localhost":
            return system_resolver(host, port)
        if host not in self.records:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return self.records[host]


class RebindingDNS(FakeDNS):
    """A hostile name server: a public address on the first lookup, 127.0.0.1 ever after."""

    def lookup(self, host: str, port: int) -> list[str]:
        return [PUBLIC] if len(self.calls) == 1 else ["127.0.0.1"]


class FakeInternet(httpcore.AsyncNetworkBackend):
    """The network under the pinned connection: records each dial, carries (address, port) to a
    local server's port per `routes`, everything else to `default` when given."""

    def __init__(self, routes: dict[tuple[str, int], int] | None = None, default: int | None = None) -> None:
        self.routes = routes or {}
        self.default = default
        self.dials: list[tuple[str, int]] = []
        self.real = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's interface
        local_address: str | None = None,
        socket_options: Any = None,
    ) -> httpcore.AsyncNetworkStream:
        self.dials.append((host, port))
        local_port = self.routes.get((host, port), self.default)
        if local_port is None:
            raise httpcore.ConnectError(f"no route to {host}:{port}")
        return await self.real.connect_tcp("127.0.0.1", local_port, timeout=timeout)

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's interface
        socket_options: Any = None,
    ) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("no unix sockets")

    async def sleep(self, seconds: float) -> None:
        await self.real.sleep(seconds)


def loopback_port(port: int) -> Callable[[IPAddress, int], str | None]:
    """The production policy, except that 127.0.0.1 on exactly `port` is let through."""

    def check(address: IPAddress, dial_port: int) -> str | None:
        if address == ipaddress.ip_address("127.0.0.1") and dial_port == port:
            return None
        return blocked_reason(address)

    return check


async def fails(coro: Any) -> ToolFailure:
    with pytest.raises(ToolFailure) as info:
        await coro
    return info.value


# --- Refused before any connection -------------------------------------------------------------

CORPUS = [
    # (url, error type, part of the message)
    ("http://127.0.0.1/", "permission_denied", "127.0.0.1 is a loopback address"),
    ("https://127.0.0.1:8443/admin", "permission_denied", "127.0.0.1 is a loopback address"),
    ("http://127.0.0.1.:8080/", "permission_denied", "127.0.0.1 is a loopback address"),
    ("http://localhost/", "permission_denied", "localhost resolves to"),
    ("http://LOCALHOST:8000/", "permission_denied", "localhost resolves to"),
    ("http://[::1]/", "permission_denied", "::1 is a loopback address"),
    ("http://[::1]:8000/", "permission_denied", "::1 is a loopback address"),
    ("http://[::ffff:127.0.0.1]/", "permission_denied", "IPv4-mapped form of 127.0.0.1"),
    ("http://[::ffff:7f00:1]/", "permission_denied", "IPv4-mapped form of 127.0.0.1"),
    ("http://2130706433/", "permission_denied", "127.0.0.1 is a loopback address"),
    ("http://0177.0.0.1/", "permission_denied", "127.0.0.1 is a loopback address"),
    ("http://017700000001/", "permission_denied", "127.0.0.1 is a loopback address"),
    ("http://0x7f000001/", "permission_denied", "127.0.0.1 is a loopback address"),
    ("http://0x7f.0.0.1/", "permission_denied", "127.0.0.1 is a loopback address"),
    ("http://0x7f.1/", "permission_denied", "127.0.0.1 is a loopback address"),
    ("http://127.1/", "permission_denied", "127.0.0.1 is a loopback address"),
    ("http://0/", "permission_denied", "0.0.0.0 is an unspecified address"),
    ("http://0.0.0.0/", "permission_denied", "0.0.0.0 is an unspecified address"),
    ("http://[::]/", "permission_denied", ":: is an unspecified address"),
    ("http://10.0.0.1/", "permission_denied", "10.0.0.1 is a private address"),
    ("http://172.16.5.4/", "permission_denied", "172.16.5.4 is a private address"),
    ("http://192.168.1.1/", "permission_denied", "192.168.1.1 is a private address"),
    ("http://0xc0a80101/", "permission_denied", "192.168.1.1 is a private address"),
    ("http://169.254.169.254/latest/meta-data/", "permission_denied", "cloud metadata"),
    ("http://[fe80::1]/", "permission_denied", "fe80::1 is a link-local address"),
    ("http://[fe80::1%25eth0]/", "permission_denied", "link-local address"),
    ("http://[fc00::1]/", "permission_denied", "fc00::1 is a private address"),
    ("http://[fd00:ec2::254]/", "permission_denied", "is a private address"),
    ("http://[fec0::1]/", "permission_denied", "fec0::1 is a site-local address"),
    ("http://100.64.0.1/", "permission_denied", "carrier-grade NAT"),
    ("http://198.18.0.1/", "permission_denied", "benchmarking"),
    ("http://224.0.0.1/", "permission_denied", "multicast"),
    ("http://[ff02::1]/", "permission_denied", "multicast"),
    ("http://240.0.0.1/", "permission_denied", "reserved"),
    ("http://255.255.255.255/", "permission_denied", "255.255.255.255"),
    ("http://192.0.2.10/", "permission_denied", "not a public address"),
    ("http://[64:ff9b::7f00:1]/", "permission_denied", "NAT64 form of 127.0.0.1"),
    ("http://[64:ff9b::a9fe:a9fe]/", "permission_denied", "NAT64 form of 169.254.169.254"),
    ("http://[64:ff9b:1::a00:1]/", "permission_denied", "local-use NAT64"),
    ("http://[2002:7f00:1::]/", "permission_denied", "6to4 form of 127.0.0.1"),
    ("http://[2002:a00:1::1]/", "permission_denied", "6to4 form of 10.0.0.1"),
    ("http://[2001:0:4136:e378:8000:63bf:80ff:fffe]/", "permission_denied", "Teredo form of 127.0.0.1"),
    ("http://[::7f00:1]/", "permission_denied", "IPv4-compatible form of 127.0.0.1"),
    ("http://rebind.test/", "permission_denied", "rebind.test resolves to 10.0.0.5, which is a private address"),
    ("http://mixed.test/", "permission_denied", "mixed.test resolves to 10.0.0.5"),
    ("http://mapped.test/", "permission_denied", "IPv4-mapped form of 169.254.169.254"),
    ("http://ula.test/", "permission_denied", "fd12:3456::1, which is a private address"),
    ("file:///etc/passwd", "validation_error", "not file: URLs"),
    ("gopher://127.0.0.1/", "validation_error", "not gopher: URLs"),
    ("ftp://example.com/", "validation_error", "not ftp: URLs"),
    ("dict://127.0.0.1:11211/", "validation_error", "not dict: URLs"),
    ("javascript:alert(1)", "validation_error", "not javascript: URLs"),
    ("//127.0.0.1/", "validation_error", "without a scheme"),
    ("http://user:pass@127.0.0.1/", "validation_error", "user name or password"),
    ("http://user@example.com/", "validation_error", "user name or password"),
    ("http://127.0.0.1\\@example.com/", "validation_error", "user name or password"),
    ("http://1.2.3.4.5/", "validation_error", "not a valid IPv4 address"),
    ("http://256.0.0.1/", "validation_error", "Not a valid URL"),
    ("http://example.com:99999/", "validation_error", "out of range"),
    ("http:///no-host", "validation_error", "no host"),
]


@pytest.fixture
def catch_all(serve: Callable[..., Server]) -> Server:
    """Answers 200 to anything: a check that let a URL through would make the fetch succeed."""
    return serve({"*": respond(200, "reached")})


@pytest.mark.parametrize(("url", "error_type", "message"), CORPUS, ids=[row[0] for row in CORPUS])
async def test_ssrf_corpus_is_refused_before_any_connection(
    url: str, error_type: str, message: str, catch_all: Server
) -> None:
    dns = FakeDNS(
        {
            "rebind.test": ["10.0.0.5"],
            "mixed.test": [PUBLIC, "10.0.0.5"],
            "mapped.test": ["::ffff:169.254.169.254"],
            "ula.test": ["fd12:3456::1"],
            "example.com": [PUBLIC],
        }
    )
    internet = FakeInternet(default=catch_all.port)

    failure = await fails(fetch(url, resolver=dns, network_backend=internet))

    assert failure.error_type == error_type
    assert message in str(failure)
    assert not failure.retryable
    assert internet.dials == []
    assert catch_all.hits == []


def test_corpus_is_large_enough() -> None:
    assert len({url for url, _, _ in CORPUS}) >= 25


async def test_blocked_message_names_the_address() -> None:
    failure = await fails(fetch("http://127.0.0.1/"))
    assert str(failure) == "Blocked: 127.0.0.1 is a loopback address."


async def test_a_name_with_one_private_address_among_public_ones_is_refused(catch_all: Server) -> None:
    dns = FakeDNS({"mixed.test": [PUBLIC, PUBLIC_2, "192.168.0.7"]})
    internet = FakeInternet(default=catch_all.port)

    failure = await fails(fetch("http://mixed.test/", resolver=dns, network_backend=internet))

    assert failure.error_type == "permission_denied"
    assert "192.168.0.7" in str(failure)
    assert internet.dials == []


async def test_the_tool_itself_uses_the_strict_policy() -> None:
    failure = await fails(fetch_page.func(ToolContext(), "http://[::ffff:169.254.169.254]/latest/meta-data/"))
    assert failure.error_type == "permission_denied"


async def test_unknown_host_is_an_error_not_a_crash() -> None:
    failure = await fails(fetch("http://nowhere.test/", resolver=FakeDNS()))
    assert failure.error_type == "execution_error"
    assert "Could not resolve nowhere.test" in str(failure)


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        ("2130706433", "127.0.0.1"),
        ("0177.0.0.1", "127.0.0.1"),
        ("0x7f.0.0.1", "127.0.0.1"),
        ("0X7F.0X0.0.0X1", "127.0.0.1"),
        ("0x7f000001", "127.0.0.1"),
        ("127.1", "127.0.0.1"),
        ("127.0.1", "127.0.0.1"),
        ("0", "0.0.0.0"),
        ("0x", "0.0.0.0"),
        ("10.1", "10.0.0.1"),
        ("192.168.257", "192.168.1.1"),
        (str(int(ipaddress.ip_address(PUBLIC))), PUBLIC),
        ("93.184.215.14.", PUBLIC),
        ("[::1]", "::1"),
        ("::ffff:7f00:1", "::ffff:7f00:1"),
        ("example.com", None),
        ("0x7f.example", None),
        ("xn--bcher-kva.de", None),
    ],
)
def test_numeric_hosts_are_read_as_the_address_they_mean(host: str, expected: str | None) -> None:
    address = parse_ip_host(host)
    assert (str(address) if address else None) == expected


@pytest.mark.parametrize(
    "host", ["1.2.3.4.5", "256.0.0.1", "1.2.3.0x100", "08.0.0.1", "0x1g.0.0.1", "1..1", "[::1::1]"]
)
def test_malformed_numeric_hosts_are_refused(host: str) -> None:
    with pytest.raises(ValueError):
        parse_ip_host(host)


@pytest.mark.parametrize("address", [PUBLIC, "8.8.8.8", "1.1.1.1", PUBLIC_V6, "2a00:1450:4001:80b::200e"])
def test_public_addresses_are_allowed(address: str) -> None:
    assert blocked_reason(ipaddress.ip_address(address)) is None


# --- Allowed fetches, through the fake internet and the strict policy --------------------------

ARTICLE = """<!doctype html>
<html><head><title>An  article &amp; more</title>
<style>body { color: red }</style><script>var leaked = "SCRIPT-SECRET";</script></head>
<body><nav><a href="/">Home</a> <a href="/about">About us</a></nav>
<h1>The heading</h1>
<p>First paragraph with <b>bold</b>
   and <a href="/x">a link</a>.</p>
<ul><li>first item</li><li>second item</li></ul>
<noscript>Please enable JavaScript</noscript>
<svg><title>icon title</title><text>svg text</text></svg>
<h2>Second   section</h2><p>Closing words.</p>
<footer>Copyright footer</footer></body></html>"""


@pytest.fixture
def site(serve: Callable[..., Server]) -> Server:
    return serve(
        {
            "/article": respond(200, ARTICLE, "text/html; charset=utf-8"),
            "/notes.txt": respond(200, "café au lait".encode("latin-1"), "text/plain; charset=iso-8859-1"),
            "/data.json": respond(200, '{"answer": 42}', "application/json"),
            "/readme.md": respond(200, "# Read me\n\nSome *markdown*.", "text/markdown"),
            "/logo.png": respond(200, b"\x89PNG\r\n\x1a\n", "image/png"),
            "/huge.txt": respond(200, "x" * (3 * 1024 * 1024), "text/plain"),
            "/missing": respond(404, "not here"),
            "/busy": respond(429, "slow down"),
            "/broken": respond(503, "down"),
        }
    )


def public_web(site: Server) -> tuple[FakeDNS, FakeInternet]:
    return FakeDNS({"public.test": [PUBLIC]}), FakeInternet({(PUBLIC, 80): site.port})


async def test_html_becomes_title_and_readable_text(site: Server) -> None:
    dns, internet = public_web(site)

    result = await fetch("http://public.test/article", resolver=dns, network_backend=internet)

    assert result["url"] == "http://public.test/article"
    assert result["title"] == "An article & more"
    assert result["content_type"] == "text/html"
    assert result["truncated"] is False
    assert result["text"] == (
        "# The heading\n\n"
        "First paragraph with bold and a link.\n\n"
        "- first item\n- second item\n\n"
        "## Second section\n\n"
        "Closing words."
    )
    for hidden in ("SCRIPT-SECRET", "color", "Home", "JavaScript", "icon title", "svg text", "Copyright"):
        assert hidden not in result["text"]


async def test_the_request_carries_the_original_host_but_goes_to_the_checked_address(site: Server) -> None:
    dns, internet = public_web(site)

    await fetch("http://public.test/article", resolver=dns, network_backend=internet)

    assert site.hits == [("/article", "public.test")]
    assert internet.dials == [(PUBLIC, 80)]
    assert dns.calls == [("public.test", 80)]


async def test_plain_text_is_passed_through_in_its_charset(site: Server) -> None:
    dns, internet = public_web(site)
    result = await fetch("http://public.test/notes.txt", resolver=dns, network_backend=internet)
    assert (result["text"], result["content_type"], result["title"]) == ("café au lait", "text/plain", "")


async def test_json_is_passed_through(site: Server) -> None:
    dns, internet = public_web(site)
    result = await fetch("http://public.test/data.json", resolver=dns, network_backend=internet)
    assert json.loads(result["text"]) == {"answer": 42}
    assert result["content_type"] == "application/json"


async def test_markdown_is_passed_through_with_its_title(site: Server) -> None:
    dns, internet = public_web(site)
    result = await fetch("http://public.test/readme.md", resolver=dns, network_backend=internet)
    assert result["text"] == "# Read me\n\nSome *markdown*."
    assert result["title"] == "Read me"


async def test_unsupported_content_type_is_an_error(site: Server) -> None:
    dns, internet = public_web(site)
    failure = await fails(fetch("http://public.test/logo.png", resolver=dns, network_backend=internet))
    assert failure.error_type == "execution_error"
    assert "Unsupported content type image/png" in str(failure)


async def test_long_text_is_cut_at_the_character_cap(site: Server) -> None:
    dns, internet = public_web(site)
    result = await fetch("http://public.test/huge.txt", resolver=dns, network_backend=internet)
    assert result["truncated"] is True
    assert len(result["text"]) == MAX_CHARS


async def test_download_stops_at_the_byte_cap_of_an_endless_body(serve: Callable[..., Server]) -> None:
    """The server would send forever: the fetch only ends because reading stops at the cap."""
    holder: list[Server] = []

    def endless(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "text/plain")
        handler.end_headers()  # no Content-Length: the body runs until the connection closes
        try:
            while not holder[0].released.is_set():
                handler.wfile.write(b"y" * 65536)
        except OSError:
            pass

    holder.append(serve({"/stream": endless}))
    dns, internet = public_web(holder[0])

    result = await fetch(
        "http://public.test/stream", resolver=dns, network_backend=internet, max_bytes=100_000, max_chars=10**6
    )

    assert result["truncated"] is True
    assert result["text"] == "y" * 100_000


@pytest.mark.parametrize(
    ("path", "error_type", "retryable", "message"),
    [
        ("/missing", "execution_error", False, "HTTP 404 Not Found"),
        ("/busy", "rate_limit_error", True, "HTTP 429"),
        ("/broken", "execution_error", True, "HTTP 503"),
    ],
)
async def test_http_errors_are_classified(
    site: Server, path: str, error_type: str, retryable: bool, message: str
) -> None:
    dns, internet = public_web(site)
    failure = await fails(fetch(f"http://public.test{path}", resolver=dns, network_backend=internet))
    assert (failure.error_type, failure.retryable) == (error_type, retryable)
    assert message in str(failure)


async def test_a_slow_server_is_a_retryable_timeout(serve: Callable[..., Server]) -> None:
    holder: list[Server] = []
    holder.append(serve({"/slow": lambda handler: holder[0].released.wait(10)}))
    dns, internet = public_web(holder[0])

    failure = await fails(fetch("http://public.test/slow", resolver=dns, network_backend=internet, deadline_s=0.3))

    assert (failure.error_type, failure.retryable) == ("timeout_error", True)


async def test_a_refused_connection_is_retryable(site: Server) -> None:
    dns = FakeDNS({"public.test": [PUBLIC]})
    failure = await fails(fetch("http://public.test/", resolver=dns, network_backend=FakeInternet()))
    assert (failure.error_type, failure.retryable) == ("execution_error", True)
    assert "Could not fetch from public.test" in str(failure)


async def test_public_numeric_and_ipv6_hosts_are_fetched(site: Server) -> None:
    internet = FakeInternet({(PUBLIC, 80): site.port, (PUBLIC_V6, 80): site.port})

    decimal = await fetch(
        f"http://{int(ipaddress.ip_address(PUBLIC))}/notes.txt", resolver=FakeDNS(), network_backend=internet
    )
    ipv6 = await fetch(f"http://[{PUBLIC_V6}]/data.json", resolver=FakeDNS(), network_backend=internet)

    assert decimal["url"] == f"http://{PUBLIC}/notes.txt"
    assert ipv6["text"] == '{"answer": 42}'
    assert internet.dials == [(PUBLIC, 80), (PUBLIC_V6, 80)]
    assert [host for _, host in site.hits] == [PUBLIC, f"[{PUBLIC_V6}]"]


# --- Redirects ---------------------------------------------------------------------------------


async def test_redirects_are_followed_and_each_hop_resolved_and_checked(serve: Callable[..., Server]) -> None:
    second = serve({"/landing": respond(200, "<title>Landed</title><p>Hello</p>", "text/html")})
    first = serve({"/start": redirect("http://public2.test/landing", 301)})
    dns = FakeDNS({"public.test": [PUBLIC], "public2.test": [PUBLIC_2]})
    internet = FakeInternet({(PUBLIC, 80): first.port, (PUBLIC_2, 80): second.port})
    checked: list[str] = []

    def check(address: IPAddress, port: int) -> str | None:
        checked.append(str(address))
        return blocked_reason(address)

    result = await fetch("http://public.test/start", resolver=dns, check=check, network_backend=internet)

    assert (result["url"], result["title"], result["text"]) == ("http://public2.test/landing", "Landed", "Hello")
    assert dns.calls == [("public.test", 80), ("public2.test", 80)]
    assert checked == [PUBLIC, PUBLIC_2]
    assert internet.dials == [(PUBLIC, 80), (PUBLIC_2, 80)]


@pytest.mark.parametrize(
    ("location", "message"),
    [
        ("http://127.0.0.1:{secret}/secret", "127.0.0.1 is a loopback address"),
        ("http://169.254.169.254/latest/meta-data/", "169.254.169.254 is a link-local address"),
        ("http://0x7f.1:{secret}/secret", "127.0.0.1 is a loopback address"),
        ("http://localhost:{secret}/secret", "localhost resolves to"),
    ],
)
async def test_a_redirect_to_a_private_address_is_not_followed(
    serve: Callable[..., Server], secret: Server, location: str, message: str
) -> None:
    """A public page (public.test → 93.184.215.14, served locally through FakeInternet) redirects
    into the private network. The policy is the production one throughout. FakeInternet can reach
    the secret server both at 127.0.0.1:<secret> and at 169.254.169.254:80, so if the redirect
    hop were not checked the fetch would succeed with "the secret" and the secret server would
    record a hit: the test fails unless the check refuses that hop."""
    site = serve({"/go": redirect(location.format(secret=secret.port))})
    dns = FakeDNS({"public.test": [PUBLIC]})
    internet = FakeInternet(
        {(PUBLIC, 80): site.port, ("127.0.0.1", secret.port): secret.port, ("169.254.169.254", 80): secret.port}
    )

    failure = await fails(fetch("http://public.test/go", resolver=dns, network_backend=internet))

    assert failure.error_type == "permission_denied"
    assert message in str(failure)
    assert site.hits == [("/go", "public.test")]
    assert secret.hits == []
    assert internet.dials == [(PUBLIC, 80)]


async def test_a_redirect_from_a_real_local_server_to_another_local_port_is_not_followed(
    serve: Callable[..., Server], secret: Server
) -> None:
    """Real sockets, no FakeInternet: the policy lets through 127.0.0.1 on the first server's
    port only, exactly as strict as production for everything else. The redirect points to the
    secret server on another loopback port, which the real dialer could reach: only the check of
    the redirect hop keeps it out."""
    site = serve({"/go": redirect(f"http://127.0.0.1:{secret.port}/secret")})

    failure = await fails(fetch(f"http://127.0.0.1:{site.port}/go", check=loopback_port(site.port)))

    assert failure.error_type == "permission_denied"
    assert "127.0.0.1 is a loopback address" in str(failure)
    assert site.hits == [("/go", f"127.0.0.1:{site.port}")]
    assert secret.hits == []


async def test_the_real_dialer_fetches_from_an_allowed_address(site: Server) -> None:
    result = await fetch(f"http://127.0.0.1:{site.port}/article", check=loopback_port(site.port))
    assert result["title"] == "An article & more"


async def test_a_redirect_to_another_scheme_is_refused(serve: Callable[..., Server]) -> None:
    site = serve({"/go": redirect("file:///etc/passwd")})
    dns, internet = FakeDNS({"public.test": [PUBLIC]}), FakeInternet({(PUBLIC, 80): site.port})
    failure = await fails(fetch("http://public.test/go", resolver=dns, network_backend=internet))
    assert failure.error_type == "validation_error"


async def test_redirect_loops_stop_after_five_hops(serve: Callable[..., Server]) -> None:
    site = serve({"/loop": redirect("/loop")})
    dns, internet = FakeDNS({"public.test": [PUBLIC]}), FakeInternet({(PUBLIC, 80): site.port})

    failure = await fails(fetch("http://public.test/loop", resolver=dns, network_backend=internet))

    assert "Too many redirects" in str(failure)
    assert len(site.hits) == 6  # the first request and five redirects


# --- DNS rebinding -----------------------------------------------------------------------------


async def test_the_connection_goes_to_the_checked_address_not_to_a_second_answer(site: Server, secret: Server) -> None:
    """RebindingDNS answers 93.184.215.14 first and 127.0.0.1 after. A client that resolved the
    name again to connect would land on 127.0.0.1:80, which FakeInternet carries to the secret."""
    dns = RebindingDNS()
    internet = FakeInternet({(PUBLIC, 80): site.port, ("127.0.0.1", 80): secret.port})

    result = await fetch("http://rebind.test/article", resolver=dns, network_backend=internet)

    assert result["title"] == "An article & more"
    assert dns.calls == [("rebind.test", 80)]
    assert internet.dials == [(PUBLIC, 80)]
    assert secret.hits == []


async def test_a_rebound_name_is_checked_again_on_the_next_hop(serve: Callable[..., Server], secret: Server) -> None:
    site = serve({"/start": redirect("/next")})
    dns = RebindingDNS()
    internet = FakeInternet({(PUBLIC, 80): site.port, ("127.0.0.1", 80): secret.port})

    failure = await fails(fetch("http://rebind.test/start", resolver=dns, network_backend=internet))

    assert failure.error_type == "permission_denied"
    assert "rebind.test resolves to 127.0.0.1" in str(failure)
    assert dns.calls == [("rebind.test", 80), ("rebind.test", 80)]
    assert internet.dials == [(PUBLIC, 80)]
    assert secret.hits == []


async def test_a_destination_only_dials_its_own_host() -> None:
    destination = await check_destination("http://public.test/", resolver=FakeDNS({"public.test": [PUBLIC]}))
    internet = FakeInternet()
    with pytest.raises(httpcore.ConnectError):
        await PinnedBackend(destination, internet).connect_tcp("other.test", 80)
    assert internet.dials == []


# --- TLS: SNI and certificate checked against the hostname, connection to the pinned IP --------


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, bytes]:
    """A test CA and a certificate for public.test: (cert file, key file, CA in PEM)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Tessera test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(True, False, False, False, False, True, True, False, False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "public.test")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("public.test")]), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    directory = tmp_path_factory.mktemp("tls")
    cert_file, key_file = directory / "cert.pem", directory / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_file, key_file, ca.public_bytes(serialization.Encoding.PEM)


@pytest.fixture
def tls_site(serve: Callable[..., Server], tls: tuple[Path, Path, bytes]) -> Server:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tls[0], tls[1])
    return serve({"/": respond(200, "<title>Secure</title><p>over TLS</p>", "text/html")}, tls=context)


async def test_https_verifies_the_hostname_while_connecting_to_the_pinned_address(
    tls_site: Server, tls: tuple[Path, Path, bytes]
) -> None:
    dns = FakeDNS({"public.test": [PUBLIC]})
    internet = FakeInternet({(PUBLIC, 443): tls_site.port})
    client_context = ssl.create_default_context(cadata=tls[2].decode())

    result = await fetch("https://public.test/", resolver=dns, network_backend=internet, ssl_context=client_context)

    assert result["title"] == "Secure"
    assert internet.dials == [(PUBLIC, 443)]
    assert tls_site.server_names == ["public.test"]
    assert tls_site.hits == [("/", "public.test")]


async def test_https_refuses_a_certificate_for_another_name(tls_site: Server, tls: tuple[Path, Path, bytes]) -> None:
    dns = FakeDNS({"other.test": [PUBLIC]})
    internet = FakeInternet({(PUBLIC, 443): tls_site.port})
    client_context = ssl.create_default_context(cadata=tls[2].decode())

    failure = await fails(
        fetch("https://other.test/", resolver=dns, network_backend=internet, ssl_context=client_context)
    )

    assert "certificate of other.test could not be verified" in str(failure)
    assert not failure.retryable
    assert tls_site.hits == []


# --- Readable text and the tool ----------------------------------------------------------------


def test_readable_text_keeps_preformatted_text_and_table_rows() -> None:
    page = ReadableHTML.parse(
        "<body><pre>  indented\n    more</pre><table><tr><td>a</td><td>b</td></tr><tr><td>c</td></tr></table>"
        "Tail &amp; end<br>next line</body>"
    )
    assert page.text == "  indented\n    more\n\na b\nc\n\nTail & end\nnext line"


def test_readable_text_uses_the_first_heading_when_there_is_no_title() -> None:
    assert ReadableHTML.parse("<h2>Only  heading</h2><p>x</p>").title == "Only heading"


def test_an_unclosed_skipped_element_hides_only_what_it_contains() -> None:
    page = ReadableHTML.parse("<div><nav><ul><li>menu</ul></div><p>Body text</p></nav><p>After</p>")
    assert "menu" not in page.text
    assert page.text.endswith("After")


def test_fetch_page_is_a_side_effect_free_tool_in_the_web_toolset() -> None:
    assert toolset.id == "web"
    assert toolset.get("fetch_page") is fetch_page
    assert not toolset.needs_api_key
    assert fetch_page.display_name == "Fetch page"
    assert fetch_page.side_effects is False
    assert fetch_page.is_async
    assert fetch_page.parameters["required"] == ["url"]
    assert fetch_page.status_text is not None
    assert fetch_page.status_text({"url": "https://example.com/a/b"}) == "Fetching example.com…"


def test_summary_shows_title_and_size() -> None:
    assert fetch_page.summarize is not None
    result = {"url": "https://e.com/", "title": "Hello", "text": "x" * 12_400, "truncated": False}
    assert fetch_page.summarize(result) == "“Hello” · 12 KB"
    untitled = {"url": "https://e.com/", "title": "", "text": "x" * 512, "truncated": True}
    assert fetch_page.summarize(untitled) == "e.com · 0.5 KB (truncated)"


async def test_download_progress_is_reported(site: Server) -> None:
    dns, internet = public_web(site)
    reports: list[tuple[str, float | None]] = []
    await fetch(
        "http://public.test/article",
        resolver=dns,
        network_backend=internet,
        progress=lambda text, percent: reports.append((text, percent)),
    )
    assert reports and reports[-1][0].startswith("Reading public.test")
