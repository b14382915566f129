"""An MCP server with MCP Apps for the tests (stdio), built with the SDK's own `mcp.server.apps`;
imports nothing from Tessera. Its View is hostile: on load it tries everything a View must not
be able to do, and writes what happened into its own page (`#report`), where a test reads it.

- `show` (model and app): names the hostile View (ui://hostile/view.html).
- `app_secret` (app only): what the View may call; never offered to the model.
- `model_only` (model only): a View may not call it.
- `huge` names a page larger than Tessera keeps (50 MB) when APPS_HUGE=1 is set.
- APPS_PAGE_VERSION changes the page (a server that changed its UI since the admin approved it).
"""

from __future__ import annotations

import os
from pathlib import Path

from mcp.server.apps import Apps, ResourceCsp
from mcp.server.mcpserver import MCPServer

VERSION = os.environ.get("APPS_PAGE_VERSION", "1")

# The View (hostile_view.html): everything a View must not do, then buttons for the rest.
VIEW = Path(__file__).with_name("hostile_view.html").read_text()

apps = Apps()


@apps.tool(resource_uri="ui://hostile/view.html", description="Shows the hostile view.")
def show(text: str = "hi") -> str:
    return f"shown: {text}"


@apps.tool(resource_uri="ui://hostile/view.html", visibility=["app"], description="Only the view calls this.")
def app_secret() -> str:
    return "app-only ran"


@apps.tool(resource_uri="ui://hostile/view.html", visibility=["model"], description="Only the model calls this.")
def model_only() -> str:
    return "model-only ran"


apps.add_html_resource(
    "ui://hostile/view.html",
    VIEW.replace("__VERSION__", VERSION),
    # A declared origin, a keyword and a bare wildcard: only the origin may reach the policy.
    csp=ResourceCsp(
        connect_domains=["https://api.example.com", "'unsafe-eval'", "*"], resource_domains=["https://cdn.example.com"]
    ),
    prefers_border=True,
)

if os.environ.get("APPS_HUGE"):

    @apps.tool(resource_uri="ui://hostile/huge.html", description="Names a page too large to keep.")
    def huge() -> str:
        return "huge"

    apps.add_html_resource("ui://hostile/huge.html", "<!doctype html><p>" + "x" * 50_000_000)


server = MCPServer(name="apps-server", version="1.0", extensions=[apps])

if __name__ == "__main__":
    server.run("stdio")
