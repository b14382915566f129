"""Asking a server for its tools and storing them: the admin's *Test connection / refresh
tools*, `make run`'s example server, and an OAuth server's first connection."""

from __future__ import annotations

from asgiref.sync import async_to_sync

from toolsets.models import UserToolsetConfig

from . import catalog, client
from .catalog import ServerSpec
from .models import MCPServer, OAuthGrant


def refresh(server: MCPServer, user_id: int | None, *, reviewed: bool = True) -> tuple[bool, str]:
    """Connects to the server as `user_id` would, lists its tools and stores them. Returns
    (ok, what to tell the admin). `reviewed`: an admin is looking, so new tools are approved;
    changed ones stay held either way (catalog.store_tools)."""
    spec = ServerSpec.of(server)
    token = ""
    if server.credential == MCPServer.Credential.USER_TOKEN:
        mine = UserToolsetConfig.objects.filter(user_id=user_id or 0, toolset_id=server.toolset_id).first()
        token = mine.api_key if mine else ""
        if not token:
            return False, f"{server.name}: each user gives their own token; add yours on /toolsets/ to test it."
    if (
        server.credential == MCPServer.Credential.OAUTH
        and not OAuthGrant.objects.filter(server=server, user_id=user_id or 0).exclude(tokens="").exists()
    ):
        return False, f"{server.name}: each user connects with OAuth; connect yourself on /toolsets/ to test it."
    try:
        found = async_to_sync(client.discover)(spec, client.access_for(spec, user_id, token))
    except ConnectionError as exc:
        catalog.record_health(server.pk, str(exc))
        catalog.write_health(server.pk)
        return False, f"{server.name}: {exc}"
    skipped = catalog.store_tools(
        server.pk,
        found.tools,
        {
            "name": found.server_name,
            "version": found.server_version,
            "protocol_version": found.protocol_version,
            "instructions": found.instructions,
        },
        reviewed=reviewed,
        pages=found.pages,
    )
    catalog.record_health(server.pk, None)
    catalog.write_health(server.pk)
    server.refresh_from_db()
    listed = ", ".join(t["name"] for t in server.tools) or "no tools"
    text = f"{server.name}: connected to {found.server_name or 'the server'} {found.server_version}".rstrip()
    if found.protocol_version:
        text += f" (protocol {found.protocol_version}{', stateless' if found.protocol_version >= '2026' else ''})"
    text += f" — {len(server.tools)} tool{'s' if len(server.tools) != 1 else ''}: {listed}."
    if skipped:
        text += " Left out: " + "; ".join(skipped[:10]) + "."
    held = server.held_tools()
    if held:
        text += f" Held until you review them (action “Accept held tool definitions”): {', '.join(sorted(held))}."
    return True, text
