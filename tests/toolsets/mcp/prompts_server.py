"""An MCP server with prompts, resources and resource templates (and completions for their
arguments), built with the SDK; stdio by default, `http PORT` for streamable HTTP, and
`MCP_LEGACY_ONLY=1` for a handshake-era server. Imports nothing from Tessera."""

from __future__ import annotations

import base64
import os
import sys

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.prompts.base import AssistantMessage, UserMessage
from mcp_types import (
    Completion,
    EmbeddedResource,
    ImageContent,
    PromptReference,
    ResourceTemplateReference,
    TextContent,
    TextResourceContents,
)

# A 1×1 PNG.
PIXEL = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
LANGUAGES = ["python", "perl", "php", "rust", "ruby"]
CITIES = {"fr": ["paris", "lyon"], "de": ["berlin", "bonn"]}

server = MCPServer(name="prompt-server", version="1.0")
if os.environ.get("MCP_LEGACY_ONLY"):
    server._lowlevel_server._request_handlers.pop("server/discover")


@server.tool()
def echo(text: str) -> str:
    """Repeat the text (a chat selects a server by its tools)."""
    return text


@server.prompt(title="Review code")
def review(language: str, focus: str = "") -> list[object]:
    """Ask for a code review in a language."""
    extra = f" Focus on {focus}." if focus else ""
    return [UserMessage(f"Review this {language} code: <b>not markup</b>.{extra}")]


@server.prompt(title="Describe a picture")
def picture() -> list[object]:
    """A picture with a question, after an example exchange."""
    return [
        UserMessage("Is this an example?"),
        AssistantMessage("Yes, <script>alert(1)</script> it is."),
        UserMessage(content=ImageContent(type="image", data=PIXEL, mime_type="image/png")),
        UserMessage(
            content=EmbeddedResource(
                type="resource",
                resource=TextResourceContents(uri="notes://style", mime_type="text/plain", text="Be brief."),
            )
        ),
        UserMessage("What colour is this pixel?"),
    ]


@server.resource("notes://today", mime_type="text/plain", title="Today's notes")
def today() -> str:
    return "Buy <b>milk</b>."


@server.resource("images://pixel", mime_type="image/png", title="A pixel")
def pixel() -> bytes:
    return base64.b64decode(PIXEL)


@server.resource("weather://{country}/{city}", mime_type="text/plain", title="Weather")
def weather(country: str, city: str) -> str:
    return f"Sunny in {city} ({country})."


@server.resource("big://blob", mime_type="text/plain", title="Too big")
def big() -> str:
    return "x" * (3 * 1024 * 1024)


@server.completion()
async def complete(ref: object, argument: object, context: object) -> Completion | None:
    name = getattr(argument, "name", "")
    value = getattr(argument, "value", "")
    if isinstance(ref, PromptReference) and name == "language":
        return Completion(values=[v for v in LANGUAGES if v.startswith(value)])
    if isinstance(ref, ResourceTemplateReference) and name == "country":
        return Completion(values=[v for v in CITIES if v.startswith(value)])
    if isinstance(ref, ResourceTemplateReference) and name == "city":
        given = (getattr(context, "arguments", None) or {}).get("country", "")
        return Completion(values=[v for v in CITIES.get(given, []) if v.startswith(value)])
    return None


_ = TextContent  # re-exported for readers: prompt text is TextContent on the wire


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "http":
        import uvicorn

        uvicorn.run(server.streamable_http_app(), host="127.0.0.1", port=int(sys.argv[2]), log_level="warning")
    else:
        server.run("stdio")
