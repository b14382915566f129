"""A real MCP server (built with the SDK) that echoes the request headers an admin configured:
the values never come back in the result, whichever form the server returns them in."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from core import redact
from toolsets.executor import execute

from .conftest import register, serve

pytestmark = pytest.mark.django_db(transaction=True)

ECHO = Path(__file__).with_name("echo_server.py")
SERVICE_KEY = "hdr-service-key-R2d9Vb"
BEARER = "bearer-only-token-Y6m3Pn"


@pytest.fixture
def echo_url() -> Iterator[str]:
    for port in serve(ECHO, "http", "{port}"):
        yield f"http://127.0.0.1:{port}/mcp"


async def test_configured_headers_echoed_by_a_server_are_redacted(user: Any, echo_url: str) -> None:
    await sync_to_async(register)(
        name="Echo",
        slug="hdrs",
        transport="http",
        url=echo_url,
        headers=json.dumps({"X-Service-Key": SERVICE_KEY, "Authorization": f"Bearer {BEARER}"}),
    )

    done = await execute("toolset__mcp_hdrs__get_headers", {}, user_id=user.pk, tool_call_id="c", pre_approved=True)

    assert done.ok, done.error
    text = json.dumps(done.result)
    assert "x-service-key" in text  # the server did receive and echo them
    assert SERVICE_KEY not in text and BEARER not in text
    assert done.result["structuredContent"]["x-service-key"] == redact.REDACTED
    assert SERVICE_KEY not in done.model_content(100_000) and BEARER not in done.model_content(100_000)
