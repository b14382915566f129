"""MCP resources as a base's documents: picked from a server the base's owner may use, read by
the files worker through the MCP client (`resources/read`), indexed like uploads, and indexed
again only when their contents changed (added again, or refreshed from the base page).

The server is used as the base's owner, with their credential and their groups, checked again
at every read: an owner who lost the server gets a failed document, not someone else's access.
What a server returns is untrusted and goes through the same size and content checks as a
resource attached to a chat (toolsets.mcp.resources).

A read that fails says whether the failure may pass (the server unreachable, slow, a broken
connection): a document indexed before then keeps its passages until the next check, while one
the server no longer has, or the owner may no longer read, fails (knowledge.ingest)."""

from __future__ import annotations

import asyncio

from asgiref.sync import async_to_sync

from toolsets import availability
from toolsets.base import ToolFailure
from toolsets.files.models import FileLimits
from toolsets.mcp import catalog, resources
from toolsets.mcp.catalog import ServerSpec
from toolsets.mcp.lists import Source
from toolsets.mcp.models import MCPServer

from .models import Document, KnowledgeBase

PREFIX = "mcp"


class Unavailable(Exception):
    """The resource cannot be read now; the message says why, for the base's page. `passing`:
    the failure is the server's or the connection's for now, not the resource's or the owner's."""

    def __init__(self, message: str, *, passing: bool = False) -> None:
        super().__init__(message)
        self.passing = passing


class Gone(Unavailable):
    """The server says the resource does not exist (any more)."""


def _availability(user_id: int, server: MCPServer) -> availability.Availability | None:
    """The user's standing with the server's toolset. A server in the database that this
    process's catalog does not know was added after the catalog was last read (at most every
    2 s, toolsets/mcp/catalog.py): a worker handed its first document at once read it again
    rather than fail the document."""
    state = availability.for_toolset(user_id, server.toolset_id)
    if state is None:
        catalog.invalidate()
        state = availability.for_toolset(user_id, server.toolset_id)
    return state


def usable_servers(user_id: int) -> list[MCPServer]:
    """The enabled MCP servers this user may use now (their groups, their switch, the admin's)."""
    found = []
    for server in MCPServer.objects.filter(enabled=True).order_by("name"):
        state = _availability(user_id, server)
        if state is not None and state.usable:
            found.append(server)
    return found


def reference(slug: str, uri: str) -> str:
    return f"{PREFIX}:{slug}:{uri}"


def parse(document: Document) -> tuple[str, str]:
    _, slug, uri = document.reference.split(":", 2)
    return slug, uri


def usable_server(user_id: int, slug: str) -> MCPServer:
    """The server, when this user may use it now, or ValueError saying so (a 400)."""
    server = next((s for s in usable_servers(user_id) if s.slug == slug), None)
    if server is None:
        raise ValueError("Choose one of the MCP servers you may use.")
    return server


def clean_uri(uri: str) -> str:
    """The URI without surrounding space, or ValueError saying what is wrong (a 400)."""
    uri = uri.strip()
    if not uri or len(uri) > 900 or not resources.valid_uri(uri):
        raise ValueError("Give the resource's URI as the server lists it, e.g. docs://handbook.")
    return uri


def listed(user_id: int, slug: str) -> tuple[MCPServer, list[resources.Listed], list[str]]:
    """The resources the server lists for this user (`resources/list`, paged and bounded by
    the composer's picker, cached by the server's hints; names and descriptions cleaned), and
    what went wrong asking; ValueError when they may not use the server."""
    server = usable_server(user_id, slug)
    state = _availability(user_id, server)
    source = Source(server, ServerSpec.of(server), state.api_key if state else "")
    found, _, problems = async_to_sync(resources.list_resources)([source], user_id)
    return server, [item for item in found if len(item.uri) <= 900], problems


def read(base: KnowledgeBase, document: Document, limits: FileLimits) -> bytes:
    """The resource's contents as bytes (several contents joined as text), as its base's owner."""
    slug, uri = parse(document)
    server = MCPServer.objects.filter(slug=slug, enabled=True).first()
    if server is None:
        raise Unavailable(f"The MCP server “{slug}” is no longer enabled.")
    state = _availability(base.owner_id, server)
    if state is None or not state.usable:
        reason = state.reason if state else "unknown"
        raise Unavailable(f"{server.name} cannot be used by this base's owner now ({reason}).")
    source = Source(server, ServerSpec.of(server), state.api_key)
    try:
        contents = asyncio.run(resources.read(source, base.owner_id, uri))
    except resources.NotFound as exc:
        raise Gone(f"The resource is gone: {exc}") from None
    except ToolFailure as exc:
        raise Unavailable(str(exc), passing=exc.retryable or exc.error_type == "timeout_error") from None
    except Exception as exc:
        raise Unavailable(f"{server.name} could not be read: {type(exc).__name__}.", passing=True) from None
    if not contents:
        raise Unavailable(f"{server.name} returned nothing for {uri}.")
    try:
        pieces = [resources.content_bytes(content, limits) for content in contents]
    except resources.Unusable as exc:
        raise Unavailable(str(exc)) from None
    if len(pieces) == 1:
        return pieces[0][0]
    # Several contents (a folder-like resource): their text, one after the other.
    data = b"\n\n".join(data for data, mime in pieces if mime.startswith("text/") or mime.endswith(("json", "xml")))
    if not data:
        raise Unavailable(f"{server.name} returned no text for {uri}.")
    if len(data) > limits.max_file_bytes:
        raise Unavailable(f"The resource is larger than {limits.max_file_mb} MB, the most a file may be.")
    return data
