from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import AsyncIterator, Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.stdio_servers import command_for, forked

SERVER = Path(__file__).with_name("server.py")


@pytest.fixture(autouse=True)
async def _close_connections() -> AsyncIterator[None]:
    yield
    from toolsets.mcp import client

    await client.close_all()


@pytest.fixture(autouse=True)
def _fresh_catalog() -> Iterator[None]:
    from toolsets.mcp import catalog

    catalog.invalidate()
    catalog._health.clear()
    yield
    catalog.invalidate()
    catalog._health.clear()


# The test stack's web and worker processes read the MCP servers again at most every
# catalog.SNAPSHOT_TTL_S (2 s; the module's default, which unit tests may raise in this process
# only): a server added here is certainly theirs once that much time has passed.
STACK_SNAPSHOT_S = 2.0


def seen_by_stack() -> None:
    """Wait until the test stack's processes see the servers this process just saved."""
    time.sleep(STACK_SNAPSHOT_S + 0.3)


def register(**fields: Any) -> Any:
    """An MCPServer row with its tools discovered, and the registry's snapshot refreshed."""
    from toolsets.mcp.discovery import refresh
    from toolsets.mcp.models import MCPServer
    from toolsets.registry import all_toolsets

    user_id = fields.pop("_as", None)
    server = MCPServer.objects.create(**fields)
    _, text = refresh(server, user_id)
    all_toolsets()
    server.refresh_from_db()
    server.refresh_message = text  # type: ignore[attr-defined]
    return server


@pytest.fixture
def stdio_server(transactional_db: Any) -> Any:
    return register(name="Test server", slug="t1", transport="stdio", timeout_s=5, **forked(SERVER))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def accepting(port: int, within_s: float = 30) -> bool:
    """Whether a server on `port` accepts connections within `within_s` seconds (a loaded
    two-core machine takes seconds to import the MCP SDK)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return True
        except OSError:
            time.sleep(0.1)
    return False


def serve(script: Path, *arguments: str) -> Generator[int]:
    """Runs `script` with `arguments` (a `{port}` among them is a free port) until the test ends,
    yielding that port once it accepts connections."""
    port = free_port()
    process = subprocess.Popen(command_for(script, *(a.format(port=port) for a in arguments)))
    accepting(port)
    try:
        yield port
    finally:
        process.terminate()
        process.wait(5)


@pytest.fixture
def http_server_url() -> Iterator[str]:
    """The test server over streamable HTTP, accepting the bearer tokens tok-alice and tok-bob."""
    for port in serve(SERVER, "http", "{port}", "tok-alice", "tok-bob"):
        yield f"http://127.0.0.1:{port}/mcp"


@pytest.fixture
def sse_server_url() -> Iterator[str]:
    """The test server over the legacy SSE transport."""
    for port in serve(SERVER, "sse", "{port}"):
        yield f"http://127.0.0.1:{port}/sse"


@pytest.fixture
def oauth_server_base() -> Iterator[str]:
    """An MCP server that is its own OAuth authorization server (oauth_server.py)."""
    for port in serve(SERVER.with_name("oauth_server.py"), "{port}"):
        yield f"http://127.0.0.1:{port}"


class Restartable:
    """A server process on a fixed port that a test stops and starts again (a redeploy)."""

    def __init__(self, script: Path, *arguments: str, env: dict[str, str] | None = None) -> None:
        self.env = {**os.environ, **(env or {})}
        self.port = free_port()
        self.command = command_for(script, *(a.format(port=self.port) for a in arguments))
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(self.command, env=self.env)
        if accepting(self.port):
            return
        # Not left running behind the failed test (a slow start still binds later).
        self.stop()
        raise RuntimeError(f"{self.command} did not start")

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                # A graceful shutdown waits for open streams (a pooled client's, in this process,
                # closes at the test's end): gone is gone either way.
                self.process.kill()
                self.process.wait(5)
            self.process = None

    def restart(self) -> None:
        self.stop()
        self.start()


@pytest.fixture
def restartable_http_server() -> Iterator[Restartable]:
    """The test server over streamable HTTP (no credential, both protocol eras), restartable."""
    server = Restartable(SERVER, "http", "{port}")
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def legacy_http_server() -> Iterator[Restartable]:
    """The test server as a handshake-era (2025) server: sessions, no `server/discover`."""
    server = Restartable(SERVER, "http", "{port}", env={"MCP_LEGACY_ONLY": "1"})
    server.start()
    try:
        yield server
    finally:
        server.stop()
