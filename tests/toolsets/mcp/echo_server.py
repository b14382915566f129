"""An MCP server that gives back what it was configured with (stdio by default, `http PORT` for
streamable HTTP), built with the SDK: its environment, the headers of the request, or any text.
Secrets an admin configured for a server must not come back through it. Imports nothing from
Tessera."""

from __future__ import annotations

import json
import os
import sys

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer(name="echo-server", version="1.0")


@server.tool()
def get_env() -> str:
    """The server's environment, as JSON."""
    return json.dumps(dict(os.environ), indent=1)


@server.tool()
def get_headers(ctx: Context) -> dict[str, str]:
    """The headers this call came with (structured content)."""
    return {str(k): str(v) for k, v in (ctx.headers or {}).items()}


@server.tool()
def echo(text: str) -> str:
    """Return the text."""
    return text


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "http":
        import uvicorn

        # Bounded: a 2026 client's open `subscriptions/listen` stream would hold a graceful shutdown.
        uvicorn.run(
            server.streamable_http_app(),
            host="127.0.0.1",
            port=int(sys.argv[2]),
            log_level="warning",
            timeout_graceful_shutdown=1,
        )
    else:
        server.run("stdio")
