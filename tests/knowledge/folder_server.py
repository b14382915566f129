"""An MCP server built with the SDK (stdio, or `http PORT FOLDER` for streamable HTTP) serving
the files of a folder as resources: `docs://{name}` is the file `name` in the folder given as
its last argument, read at each request, so a test changes a resource by writing the file and
removes it by deleting the file (the server then answers "resource not found"). The `announce`
tool sends the handshake era's change notifications (run it over HTTP with `MCP_LEGACY_ONLY=1`).
Imports nothing from Tessera."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError

FOLDER = Path(sys.argv[-1]) if len(sys.argv) > 1 else Path.cwd()
server = MCPServer(name="folder-server", version="1.0")
if os.environ.get("MCP_LEGACY_ONLY"):
    server._lowlevel_server._request_handlers.pop("server/discover")


@server.tool()
def echo(text: str) -> str:
    """Repeat the text."""
    return text


@server.tool()
async def announce(name: str, ctx: Context) -> str:
    """Say that docs://`name` changed, or with no name that the list of resources did."""
    session = ctx.request_context.session
    if name:
        await session.send_resource_updated(f"docs://{name}")
    else:
        await session.send_resource_list_changed()
    return "announced"


@server.resource("docs://{name}", mime_type="text/markdown", title="A document of the folder")
def document(name: str) -> str:
    path = FOLDER / name
    if "/" in name or not path.is_file():
        raise ResourceNotFoundError(f"Unknown resource: docs://{name}")
    return path.read_text()


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "http":
        import uvicorn

        uvicorn.run(server.streamable_http_app(), host="127.0.0.1", port=int(sys.argv[2]), log_level="warning")
    else:
        server.run("stdio")
