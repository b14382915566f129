from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

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


def register(**fields: Any) -> Any:
    """An MCPServer row with its tools discovered, and the registry's snapshot refreshed."""
    from toolsets.mcp.admin import refresh
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
    return register(
        name="Test server", slug="t1", transport="stdio", command=sys.executable, args=[str(SERVER)], timeout_s=5
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def http_server_url() -> Iterator[str]:
    """The test server over streamable HTTP, accepting the bearer tokens tok-alice and tok-bob."""
    port = free_port()
    process = subprocess.Popen([sys.executable, str(SERVER), "http", str(port), "tok-alice", "tok-bob"])
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.1)
    yield f"http://127.0.0.1:{port}/mcp"
    process.terminate()
    process.wait(5)
