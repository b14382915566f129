"""A server's tool list and how its changes are heard: every page of the list, and a 2026
server's `subscriptions/listen` stream (the handshake era's notifications arrive unasked, see
`Connection._on_message`)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from mcp.client import Client
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from . import untrusted
from .errors import describe

log = logging.getLogger(__name__)

MAX_TOOL_PAGES = 20
# The pause before listening again after the stream drops, doubling up to the most.
LISTEN_BACKOFF_START_S = 1.0
LISTEN_BACKOFF_MAX_S = 60.0


def listens(client: Client) -> bool:
    """Whether the server's changes come on a stream the client must open."""
    tools = client.server_capabilities.tools
    return client.protocol_version in MODERN_PROTOCOL_VERSIONS and bool(tools and tools.list_changed)


async def listen(
    client: Client, ended: asyncio.Event, listening: asyncio.Event, changed: Callable[[], None], name: str
) -> None:
    """Calls `changed` for each change the server announces until `ended`. The stream has no
    replay: after a drop, listen again and list again. `listening` is set once it is open (or
    failed to open)."""
    pause = LISTEN_BACKOFF_START_S
    while not ended.is_set():
        try:
            async with client.listen(tools_list_changed=True) as subscription:
                pause = LISTEN_BACKOFF_START_S
                if listening.is_set():
                    changed()  # events may have been missed while it was down
                listening.set()
                async for _event in subscription:
                    changed()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.info("MCP server %s: change stream ended (%s)", name, describe(exc))
        listening.set()
        await asyncio.sleep(pause)
        pause = min(LISTEN_BACKOFF_MAX_S, pause * 2)


async def list_all_tools(client: Client, fresh: bool = False) -> list[dict[str, Any]]:
    """Every page of the server's tools (bounded); `fresh` skips the hint-driven cache, as after a
    change notification."""
    listed: list[dict[str, Any]] = []
    cursor: str | None = None
    for _ in range(MAX_TOOL_PAGES):
        page = await client.list_tools(cursor=cursor, cache_mode="refresh" if fresh else "use")
        listed += [tool.model_dump(by_alias=True, mode="json", exclude_none=True) for tool in page.tools]
        cursor = page.next_cursor
        if not cursor or len(listed) > untrusted.MAX_TOOLS * 2:
            break
    return listed
