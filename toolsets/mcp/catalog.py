"""MCP servers as toolsets, built from the database for the registry.

`toolsets()` is what `toolsets.registry` asks for on every lookup, so it answers from an
in-process snapshot, rebuilt from the database at most every SNAPSHOT_TTL_S seconds, at once
after a change saved in this process, and never on an event loop's thread (the worker's loop
must not block on a query: it uses the snapshot its turn's preparation just refreshed).

Everything a server says about its tools is untrusted: names are mapped to provider-safe keys
(`names`), descriptions are stripped of control characters and capped, input schemas must be
valid, self-contained JSON schemas of an object, and the list is bounded (`untrusted`).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from django.db import DatabaseError
from django.db.models.signals import m2m_changed, post_delete, post_save
from django.utils import timezone
from django.utils.timesince import timesince

from toolsets.base import Tool, ToolContext, Toolset, humanize

from . import names, results
from .app_resources import Page, Refusal
from .models import AppResource, MCPServer, OAuthGrant
from .untrusted import MAX_TITLE, clean_text, clean_tools

log = logging.getLogger(__name__)

SNAPSHOT_TTL_S = 2.0
# A failure this recent (and no success since) makes the server "unreachable"; after it, calls
# are tried again, so a server that came back is noticed by the next turn that uses it.
UNREACHABLE_FOR_S = 30.0
MAX_INSTRUCTIONS = 2000
UNREACHABLE = "Server unreachable"


@dataclass(frozen=True)
class ServerSpec:
    """What a process needs to connect to a server: a plain, immutable copy of its row."""

    id: int
    toolset_id: str
    name: str
    transport: str
    url: str = ""
    command: str = ""
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    credential: str = MCPServer.Credential.NONE
    credential_header: str = "Authorization"
    credential_format: str = "Bearer {token}"
    oauth_scopes: str = ""
    oauth_client_id: str = ""
    oauth_client_secret: str = field(default="", repr=False)
    oauth_issuer: str = ""
    oauth_token_endpoint: str = ""
    timeout_s: float = 30.0
    # Whether its tools' MCP Apps pages are fetched and shown (`MCPServer.apps_enabled`).
    apps: bool = True
    # Changes whenever the row does: connections made from an older version are replaced.
    version: str = ""

    @classmethod
    def of(cls, server: MCPServer) -> ServerSpec:
        return cls(
            id=server.pk,
            toolset_id=server.toolset_id,
            name=server.name,
            transport=server.transport,
            url=server.url,
            command=server.command,
            args=tuple(str(a) for a in server.args or []),
            env=tuple(sorted(server.env_map().items())),
            headers=tuple(sorted(server.header_map().items())),
            credential=server.credential,
            credential_header=server.credential_header,
            credential_format=server.credential_format,
            oauth_scopes=server.oauth_scopes,
            oauth_client_id=server.oauth_client_id,
            oauth_client_secret=server.oauth_client_secret,
            oauth_issuer=server.oauth_issuer,
            oauth_token_endpoint=server.oauth_token_endpoint,
            timeout_s=float(server.timeout_s),
            apps=server.apps_enabled,
            version=server.updated_at.isoformat() if server.updated_at else "",
        )


@dataclass
class Health:
    last_error: str = ""
    last_error_at: datetime | None = None
    last_ok_at: datetime | None = None

    def status(self) -> tuple[str, str]:
        failing = self.last_error_at is not None and (self.last_ok_at is None or self.last_error_at > self.last_ok_at)
        if not failing or self.last_error_at is None:
            return "", ""
        if (timezone.now() - self.last_error_at).total_seconds() > UNREACHABLE_FOR_S:
            return "", ""
        return UNREACHABLE, f"{self.last_error} ({timesince(self.last_error_at)} ago)"


@dataclass
class _Snapshot:
    toolsets: dict[str, Toolset]
    specs: dict[str, ServerSpec]
    built_at: float


_lock = threading.Lock()
_snapshot = _Snapshot({}, {}, 0.0)
_health: dict[int, Health] = {}


def toolsets() -> dict[str, Toolset]:
    return _current().toolsets


def spec_for(toolset_id: str) -> ServerSpec | None:
    return _current().specs.get(toolset_id)


def invalidate() -> None:
    global _snapshot
    with _lock:
        _snapshot = _Snapshot(_snapshot.toolsets, _snapshot.specs, 0.0)


def _current() -> _Snapshot:
    global _snapshot
    snapshot = _snapshot
    if time.monotonic() - snapshot.built_at < SNAPSHOT_TTL_S or _in_event_loop():
        return snapshot
    with _lock:
        if time.monotonic() - _snapshot.built_at >= SNAPSHOT_TTL_S:
            try:
                _snapshot = _build()
            except (DatabaseError, RuntimeError):
                # No table yet (before `migrate`) or no database allowed here (a check, a
                # test without one): the built-in toolsets must still resolve.
                log.debug("MCP servers could not be read", exc_info=True)
                _snapshot = _Snapshot(_snapshot.toolsets, _snapshot.specs, time.monotonic())
        return _snapshot


def _in_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _build() -> _Snapshot:
    built: dict[str, Toolset] = {}
    specs: dict[str, ServerSpec] = {}
    for server in MCPServer.objects.prefetch_related("groups"):
        spec = ServerSpec.of(server)
        health = _health.setdefault(server.pk, Health())
        _merge_health(health, server)
        built[server.toolset_id] = _toolset(server, spec, health)
        specs[server.toolset_id] = spec
    return _Snapshot(built, specs, time.monotonic())


def _merge_health(health: Health, server: MCPServer) -> None:
    # Whichever is newer wins: this process's own observation or another process's, stored.
    if server.last_error_at and (health.last_error_at is None or server.last_error_at > health.last_error_at):
        health.last_error, health.last_error_at = server.last_error, server.last_error_at
    if server.last_ok_at and (health.last_ok_at is None or server.last_ok_at > health.last_ok_at):
        health.last_ok_at = server.last_ok_at


def _toolset(server: MCPServer, spec: ServerSpec, health: Health) -> Toolset:
    listed = [t for t in server.tools if isinstance(t, dict) and isinstance(t.get("name"), str)]
    if server.allowed_tools:
        listed = [t for t in listed if t["name"] in server.allowed_tools]
    keys = names.tool_keys(server.toolset_id, [t["name"] for t in listed])
    held = server.held_tools()
    approved = server.approved_tools if isinstance(server.approved_tools, dict) else {}
    tools = [
        _tool(spec, keys[t["name"]], approved.get(t["name"]) or t, held.get(t["name"], ""), server) for t in listed
    ]
    oauth = server.credential == MCPServer.Credential.OAUTH
    server_id = server.pk
    return Toolset(
        id=server.toolset_id,
        name=server.name,
        description=server.description or f"Tools from the MCP server {server.server_name or server.name}.",
        tools=tools,
        needs_api_key=server.credential == MCPServer.Credential.USER_TOKEN,
        user_key_only=True,
        needs_setup=(
            lambda user_id: (
                not OAuthGrant.objects.filter(server_id=server_id, user_id=user_id).exclude(tokens="").exists()
            )
        )
        if oauth
        else None,
        enabled=server.enabled,
        group_ids=frozenset(group.pk for group in server.groups.all()),
        status_check=health.status,
        card_template="toolsets/mcp/_card.html",
        # One server behind all the tools: its failures also open one breaker for all of them.
        shared_breaker=True,
        instructions=server.instructions if server.use_instructions else "",
    )


class Client(Protocol):
    """What a server's tools run through: `toolsets.mcp.client`, handed in by the app's
    `ready()`, so that this module (which the client reads specs and stores tools through)
    never imports it: the package's imports go one way, client → catalog."""

    async def call_tool(
        self, spec: ServerSpec, name: str, arguments: dict[str, Any], ctx: ToolContext
    ) -> dict[str, Any]: ...

    async def connect(self, spec: ServerSpec, ctx: ToolContext) -> None: ...


_runner: Client | None = None


def use_client(client: Client) -> None:
    global _runner
    _runner = client


def _client() -> Client:
    if _runner is None:
        raise RuntimeError("The MCP app is not ready: toolsets.mcp.apps installs the client.")
    return _runner


HELD = {
    "changed": "is held: its server changed the tool's definition since an admin approved it, so it does "
    "not run until an admin reviews the change.",
    "new": "is held: its server added it after an admin last looked, so it does not run until an admin reviews it.",
}


def _tool(spec: ServerSpec, key: str, listed: dict[str, Any], held: str, server: MCPServer) -> Tool:
    """`listed` is the approved definition when there is one: a held tool shows (and would be
    described to the model with) what the admin saw, never the server's new words."""
    original = listed["name"]

    async def call(ctx: ToolContext, /, **arguments: Any) -> dict[str, Any]:
        return await _client().call_tool(spec, original, arguments, ctx)

    async def connect(ctx: ToolContext) -> None:
        await _client().connect(spec, ctx)

    annotations = listed.get("annotations") or {}
    # Annotations are claims of an untrusted server: only an admin's trust lets "read-only" run
    # a tool without asking. A claim that asks for more care (destructive) is always heeded.
    read_only = server.trust_annotations and annotations.get("readOnlyHint") is True
    listed_ui = listed.get("ui")
    ui: dict[str, Any] = listed_ui if isinstance(listed_ui, dict) else {}
    visibility = ui.get("visibility") or ["model", "app"]
    return Tool(
        func=call,
        name=key,
        display_name=listed.get("title") or humanize(original)[:MAX_TITLE] or key,
        description=listed.get("description") or humanize(original),
        parameters=listed.get("inputSchema") or {"type": "object"},
        timeout_s=spec.timeout_s,
        # Only a tool of a trusted server that calls it read-only is retried after a transient
        # failure, and runs without asking: the others' policy defaults to Ask (toolsets.policy).
        side_effects=not read_only,
        always_allowable=annotations.get("destructiveHint") is not True,
        hints=("Reaches outside services",) if annotations.get("openWorldHint") is True else (),
        held=HELD.get(held, ""),
        summarize=results.summary,
        wants_context=True,
        prepare=connect,
        model_text=results.model_text,
        model_visible="model" in visibility,
        app={
            "name": original,
            "sha256": ui.get("sha256", ""),
            "uri": ui.get("resourceUri", ""),
            "callable": "app" in visibility,
            "refused": str(ui.get("refused") or ""),
        }
        if server.apps_enabled
        else None,
    )


# --- Writes from connections (called in a thread) ----------------------------------------------


def store_tools(
    server_id: int,
    listed: list[dict[str, Any]],
    server_info: dict[str, Any] | None = None,
    *,
    reviewed: bool = False,
    pages: dict[str, Page | str] | None = None,
) -> list[str]:
    """Stores what the server listed. Definitions are pinned: a new tool is approved when an
    admin is looking (`reviewed`: their Test connection) or on the server's very first listing;
    a changed one never is here (see `approve`). `pages`: the MCP Apps pages the tools name, as
    read (`app_resources.read_all`); None: not read this time (apps off, or only a refresh)."""
    kept, skipped = clean_tools(listed)
    fields: dict[str, Any] = {"tools": kept, "tools_refreshed_at": timezone.now()}
    row = MCPServer.objects.filter(pk=server_id).values("approved_tools", "tools_refreshed_at", "tools").first()
    if row is not None:
        skipped += _pin_pages(server_id, kept, row["tools"], pages)
        approved = dict(row["approved_tools"]) if isinstance(row["approved_tools"], dict) else {}
        first_listing = not approved and row["tools_refreshed_at"] is None
        if reviewed or first_listing:
            approved.update({t["name"]: t for t in kept if t["name"] not in approved})
            fields["approved_tools"] = approved
    if server_info is not None:
        fields["server_name"] = clean_text(server_info.get("name"), 200)
        fields["server_version"] = clean_text(server_info.get("version"), 100)
        fields["instructions"] = clean_text(server_info.get("instructions"), MAX_INSTRUCTIONS)
        if server_info.get("protocol_version"):
            fields["protocol_version"] = clean_text(server_info["protocol_version"], 20)
    # update(), not save(): the row's version (updated_at) stays, so live connections are kept.
    MCPServer.objects.filter(pk=server_id).update(**fields)
    invalidate()
    return skipped


def _pin_pages(
    server_id: int, kept: list[dict[str, Any]], stored: Any, pages: dict[str, Page | str] | None
) -> list[str]:
    """Names each tool's page by its hash in the tool's definition (so a changed page holds the
    tool) and keeps the page. A page not read this time, or failing to, keeps the hash stored
    before: a server's passing hiccup must not hold its tools."""
    before = {
        t["name"]: t["ui"]
        for t in stored or []
        if isinstance(t, dict) and isinstance(t.get("ui"), dict) and "name" in t
    }
    notes: list[str] = []
    for tool in kept:
        ui = tool.get("ui")
        uri = ui.get("resourceUri") if isinstance(ui, dict) else None
        if not uri:
            continue
        assert isinstance(ui, dict)
        found = pages.get(uri) if pages is not None else None
        if isinstance(found, Page):
            AppResource.objects.get_or_create(
                server_id=server_id,
                sha256=found.sha256,
                defaults={"uri": uri, "html": found.html, "meta": found.meta},
            )
            ui["sha256"] = found.sha256
            continue
        if isinstance(found, str):
            notes.append(f"{tool['name']}: its page {uri} was not kept ({found})")
        previous = before.get(tool["name"], {})
        if previous.get("resourceUri") == uri and previous.get("sha256"):
            ui["sha256"] = previous["sha256"]
        elif isinstance(found, Refusal):
            # No page to fall back on, refused for what it is: its cards say why.
            ui["refused"] = str(found)[:300]
        elif previous.get("resourceUri") == uri and previous.get("refused"):
            ui["refused"] = previous["refused"]
    return notes


def approve(server: MCPServer, names_: list[str] | None = None) -> list[str]:
    """An admin accepts the listed definitions of held tools (all, or those named): they are
    pinned as they are now. Returns the names accepted."""
    held = server.held_tools()
    chosen = [n for n in held if names_ is None or n in names_]
    if not chosen:
        return []
    listed = {t["name"]: t for t in server.tools if isinstance(t, dict)}
    approved = dict(server.approved_tools) if isinstance(server.approved_tools, dict) else {}
    approved.update({n: listed[n] for n in chosen})
    server.approved_tools = approved
    MCPServer.objects.filter(pk=server.pk).update(approved_tools=approved)
    invalidate()
    return chosen


def record_health(server_id: int, error: str | None) -> bool:
    """Notes a failure (error text) or a success (None) of this process; True when the stored
    state should change (the caller then writes it)."""
    health = _health.setdefault(server_id, Health())
    now = timezone.now()
    if error is None:
        changed = health.last_ok_at is None or (
            health.last_error_at is not None and health.last_error_at >= health.last_ok_at
        )
        health.last_ok_at = now
        return changed
    health.last_error, health.last_error_at = error[:2000], now
    return True


def write_health(server_id: int) -> None:
    health = _health.get(server_id)
    if health is None:
        return
    MCPServer.objects.filter(pk=server_id).update(
        last_error=health.last_error, last_error_at=health.last_error_at, last_ok_at=health.last_ok_at
    )


def _changed(**_: Any) -> None:
    invalidate()


def connect_signals() -> None:
    # A module-level receiver: signals keep only a weak reference, so a function defined in
    # here would be collected on return and never called.
    post_save.connect(_changed, sender=MCPServer, dispatch_uid="mcp-catalog-save")
    post_delete.connect(_changed, sender=MCPServer, dispatch_uid="mcp-catalog-delete")
    post_save.connect(_changed, sender=OAuthGrant, dispatch_uid="mcp-catalog-grant")
    # Admin's form saves a server's groups after the row: the snapshot must see them too.
    m2m_changed.connect(_changed, sender=MCPServer.groups.through, dispatch_uid="mcp-catalog-groups")
