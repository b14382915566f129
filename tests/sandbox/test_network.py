"""The sandbox's network allow-list (sandbox/netproxy.py): none by default; a listed host is
reached through the worker's proxy; any other host, a listed name resolving to a private,
loopback or metadata address, an address literal, a port not listed and a direct connection
are all refused, and the session goes on. Real bubblewrap and the real kernel; the listed host
is a server on this machine, which only the test's own address check lets through."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from ipaddress import IPv4Address
from pathlib import Path
from typing import Any

import pytest

from core.addresses import blocked_reason
from sandbox import jail, netproxy
from sandbox.session import Session

LIMITS = jail.Limits(cpu_s=4, wall_s=15, memory_mb=1024, processes=24, output_chars=10_000)
NAMES = {
    "allowed.test": ["127.0.0.1"],
    "private.test": ["10.0.0.5"],
    "meta.test": ["169.254.169.254"],
    # One good answer and one private: the whole host is refused.
    "mixed.test": ["127.0.0.1", "10.0.0.9"],
}


class Hello(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = f"hello from {self.path}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def server() -> Iterator[int]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Hello)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield httpd.server_address[1]
    httpd.shutdown()


@pytest.mark.parametrize("rule", ["10.0.0.1", "127.0.0.1:80", "169.254.169.254", "[::1]", "*.8.8.8.8", "a b", "x:0"])
def test_the_list_never_admits_private_addresses_or_nonsense(rule: str) -> None:
    with pytest.raises(ValueError):
        netproxy.parse_rule(rule)


def test_names_wildcards_and_ports_match_as_listed() -> None:
    rules = [netproxy.parse_rule(r) for r in ("files.example.com", "*.data.example.org", "api.example.net:8443")]
    assert netproxy.allowed("FILES.example.com.", 443, rules)
    assert netproxy.allowed("a.b.data.example.org", 80, rules)
    assert not netproxy.allowed("data.example.org", 443, rules)
    assert not netproxy.allowed("evil-files.example.com", 443, rules)
    assert not netproxy.allowed("files.example.com.evil.net", 443, rules)
    assert not netproxy.allowed("files.example.com", 22, rules)
    assert netproxy.allowed("api.example.net", 8443, rules) and not netproxy.allowed("api.example.net", 443, rules)
    assert netproxy.parse_rule("93.184.215.14") == ("93.184.215.14", (80, 443))


@pytest.mark.skipif(bool(jail.missing()), reason=jail.missing() or "ok")
def test_only_listed_public_hosts_are_reached(server: int, tmp_path: Path, settings: Any) -> None:
    settings.SANDBOX_DIR = tmp_path
    data = tmp_path / "data"
    data.mkdir()
    for folder in (data, *data.parents):
        if folder == Path("/"):
            break
        folder.chmod(folder.stat().st_mode | 0o005)

    def resolve(host: str, port: int) -> list[str]:
        if host not in NAMES:
            raise OSError("no such host")
        return NAMES[host]

    def check(address: Any, port: int) -> str | None:
        # The test server is on this machine: only it, on its port, passes as if public.
        return None if address == IPv4Address("127.0.0.1") and port == server else blocked_reason(address)

    ports: tuple[int, ...] = (server,)
    rules = [(name, ports) for name in ("allowed.test", "private.test", "meta.test", "mixed.test")] + [
        ("allowed.test", (80,))
    ]
    session = Session(7, data, LIMITS, rules, resolver=resolve, check=check)
    out: list[str] = []
    try:
        code = (
            "import socket, urllib.request, urllib.error\n"
            "def get(url):\n"
            "    try:\n"
            "        return urllib.request.urlopen(url, timeout=10).read().decode()\n"
            "    except urllib.error.HTTPError as e:\n"
            "        return f'{e.code} {e.read().decode().strip()}'\n"
            "    except OSError as e:\n"
            "        return f'failed {e}'\n"
            f"for url in ['http://allowed.test:{server}/hi', 'http://other.test:{server}/', "
            f"'http://private.test:{server}/', 'http://meta.test:{server}/', 'http://127.0.0.1:{server}/', "
            f"'http://mixed.test:{server}/', 'http://allowed.test:{server + 1}/', 'http://allowed.test/']:\n"
            "    print(url.split('//')[1].split('/')[0], '->', get(url))\n"
            "try:\n"
            f"    socket.create_connection(('127.0.0.1', {server}), timeout=3); print('direct: connected')\n"
            "except OSError as e:\n"
            "    print('direct: refused')\n"
            # HTTPS's way: a CONNECT tunnel through the relay, then the request inside it.
            "s = socket.create_connection(('127.0.0.1', 3128), timeout=10)\n"
            f"s.sendall(b'CONNECT allowed.test:{server} HTTP/1.1\\r\\n\\r\\n')\n"
            "print('tunnel:', s.recv(100).split(b'\\r\\n')[0].decode())\n"
            "s.sendall(b'GET /tunnel HTTP/1.0\\r\\n\\r\\n')\n"
            # HTTP/1.0: the answer ends when the server closes; one recv may hold only its head.
            "got = b''\n"
            "while chunk := s.recv(1000):\n    got += chunk\n"
            "print('through:', got.split(b'\\r\\n\\r\\n')[-1].decode())\n"
        )
        outcome = session.run(code, lambda stream, text: out.append(text), lambda: False)
        assert outcome.ok, (outcome, out)
        lines = dict(line.split(" -> ", 1) for line in "".join(out).splitlines() if " -> " in line)
        assert lines[f"allowed.test:{server}"] == "hello from /hi"
        assert lines[f"other.test:{server}"].startswith("403 other.test") and "not on" in lines[f"other.test:{server}"]
        assert (
            lines[f"private.test:{server}"].startswith("403") and "private address" in lines[f"private.test:{server}"]
        )
        assert "metadata" in lines[f"meta.test:{server}"]
        assert lines[f"127.0.0.1:{server}"].startswith("403") and "not on" in lines[f"127.0.0.1:{server}"]
        # Listed on port 80 too, but resolving to loopback there: refused by the address check.
        assert lines["allowed.test"].startswith("403") and "loopback" in lines["allowed.test"]
        assert "direct: refused" in "".join(out)
        assert lines[f"mixed.test:{server}"].startswith("403") and "10.0.0.9" in lines[f"mixed.test:{server}"]
        assert "not on" in lines[f"allowed.test:{server + 1}"]
        assert "tunnel: HTTP/1.1 200 Connection established" in "".join(out)
        assert "through: hello from /tunnel" in "".join(out)
        # The session goes on.
        out.clear()
        assert session.run("print(1 + 1)", lambda stream, text: out.append(text), lambda: False).ok
        assert "".join(out) == "2\n"
    finally:
        session.close()
    assert not list((tmp_path / "net").iterdir())


@pytest.mark.skipif(bool(jail.missing()), reason=jail.missing() or "ok")
def test_by_default_there_is_no_proxy_and_no_way_out(tmp_path: Path, settings: Any) -> None:
    settings.SANDBOX_ALLOWED_HOSTS = []
    data = tmp_path / "data"
    data.mkdir()
    for folder in (data, *data.parents):
        if folder == Path("/"):
            break
        folder.chmod(folder.stat().st_mode | 0o005)
    session = Session(8, data, LIMITS)
    out: list[str] = []
    try:
        code = (
            "import os, socket\nprint(os.environ.get('HTTPS_PROXY'), os.path.exists('/run/tessera'))\n"
            "try:\n    socket.create_connection(('127.0.0.1', 3128), timeout=2); print('open')\n"
            "except OSError:\n    print('closed')\n"
        )
        assert session.run(code, lambda stream, text: out.append(text), lambda: False).ok
        assert "".join(out) == "None False\nclosed\n"
        assert session.proxy is None
    finally:
        session.close()
