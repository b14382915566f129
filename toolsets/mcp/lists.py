"""The pieces the composer's prompt and resource pickers share: which servers a chat may use,
lists cached by the server's hints, and requests made on the process's pooled connections (on
its lasting loop: `client.on_lasting_loop`). Everything a server returns is untrusted."""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from django.core.cache import cache

from toolsets import availability
from toolsets.base import ToolFailure

from .catalog import ServerSpec
from .client import access_for, on_lasting_loop, pool
from .errors import describe
from .models import MCPServer

MAX_ITEMS = 200
MAX_PAGES = 10
MAX_ARGUMENTS = 20
MAX_ARGUMENT_LENGTH = 4000
MAX_SUGGESTIONS = 20
# A list result without a `ttlMs` hint (every handshake-era server) is kept this long: the
# menu opens on every "/" typed, and a server's prompts rarely change within a minute.
DEFAULT_TTL_S = 60.0
MAX_TTL_S = 3600.0


@dataclass(frozen=True)
class Source:
    """A server the user may use in this chat: enabled, selected by the chat, available to them."""

    server: MCPServer
    spec: ServerSpec
    api_key: str

    @property
    def slug(self) -> str:
        return self.server.slug


def sources(user_id: int, selection: Any) -> list[Source]:
    """The MCP servers a chat's selection (`Chat.enabled_tools`) names that the user may use."""
    chosen = [key for key, value in (selection or {}).items() if key.startswith("mcp_") and value]
    if not chosen:
        return []
    found = []
    for server in MCPServer.objects.filter(enabled=True).order_by("name"):
        if server.toolset_id not in chosen:
            continue
        state = availability.for_toolset(user_id, server.toolset_id)
        if state is not None and state.usable:
            found.append(Source(server, ServerSpec.of(server), state.api_key))
    return found


def source(user_id: int, selection: Any, slug: str) -> Source | None:
    return next((s for s in sources(user_id, selection) if s.slug == slug), None)


async def request(found: Source, user_id: int, send: Callable[[Any], Awaitable[Any]]) -> dict[str, Any]:
    """One request to the server with the user's own access, on the pooled connection for that
    access (see `client.on_lasting_loop`), with the connection's retry of a lost session and its readable
    failures (ToolFailure). The result comes back dumped to JSON (camelCase keys, as on the
    wire)."""
    access = access_for(found.spec, user_id, found.api_key)

    async def pooled() -> dict[str, Any]:
        connection = pool().connection(found.spec, access)
        try:
            return await connection._request(send, found.spec.timeout_s)
        except ToolFailure:
            raise
        except Exception as exc:  # a malformed answer, a broken stream: the user's request fails
            raise ToolFailure(f"{found.spec.name}: the request failed ({describe(exc)}).") from None

    return await on_lasting_loop(pooled)


async def cached_list(found: Source, user_id: int, method: str, key: str) -> list[dict[str, Any]]:
    """Every page of a list method (`prompts/list`, `resources/list`, `resources/templates/list`),
    as dumped JSON items under `key`, kept for as long as the server's `ttlMs` hint says (for the
    user alone unless its `cacheScope` says the list is the same for everyone)."""
    access = access_for(found.spec, user_id, found.api_key)
    scope = hashlib.sha256(access.key.encode()).hexdigest()[:16]
    base = f"mcp:list:{found.spec.id}:{found.spec.version}:{method}"
    for cache_key in (f"{base}:shared", f"{base}:{scope}"):
        hit = cache.get(cache_key)
        if hit is not None:
            return hit  # type: ignore[no-any-return]
    items: list[dict[str, Any]] = []
    ttl: float | None = None
    shared = False
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        page = await request(found, user_id, _lister(method, cursor))
        items += [i for i in page.get(key) or [] if isinstance(i, dict)]
        hint = page.get("ttlMs")
        if isinstance(hint, int | float) and not isinstance(hint, bool):
            ttl = hint / 1000 if ttl is None else min(ttl, hint / 1000)
        shared = page.get("cacheScope") == "shared"
        cursor = page.get("nextCursor")
        if not cursor or len(items) >= MAX_ITEMS:
            break
    items = items[:MAX_ITEMS]
    timeout = DEFAULT_TTL_S if ttl is None else min(ttl, MAX_TTL_S)
    if timeout > 0:
        cache.set(f"{base}:shared" if shared else f"{base}:{scope}", items, timeout)
    return items


def _lister(method: str, cursor: str | None) -> Callable[[Any], Awaitable[Any]]:
    async def send(client: Any) -> Any:
        # A server without the capability would answer "method not found": it lists nothing.
        capabilities = client.server_capabilities
        offered = capabilities.prompts if method == "prompts/list" else capabilities.resources
        if offered is None:
            return _Empty()
        call = {
            "prompts/list": client.list_prompts,
            "resources/list": client.list_resources,
            "resources/templates/list": client.list_resource_templates,
        }[method]
        # The connection is this request's alone: the SDK's cache would die with it.
        return await call(cursor=cursor, cache_mode="bypass")

    return send


class _Empty:
    """The result of a request a server cannot answer (no such capability): nothing."""

    def model_dump(self, **_: Any) -> dict[str, Any]:
        return {}
