"""An MCP server whose tools ask the user things (elicitation), built with the SDK; the tests
start it (stdio by default, `http PORT` for streamable HTTP). Imports nothing from Tessera.

It speaks both protocol eras: to a handshake-era client a question is an `elicitation/create`
request during the call; to a 2026-07-28 client the call answers `InputRequiredResult` and is
retried with the answers (multi round-trip requests). `MCP_LEGACY_ONLY=1` makes it a
handshake-era server, as does a `legacy` argument."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import (
    CallToolResult,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitRequestURLParams,
    ElicitResult,
    InputRequiredResult,
    TextContent,
)

server = MCPServer(name="asking-server", version="1.0")
if os.environ.get("MCP_LEGACY_ONLY") or "legacy" in sys.argv:
    server._lowlevel_server._request_handlers.pop("server/discover")

SCHEMAS: dict[str, dict[str, Any]] = {
    "contact": {
        "type": "object",
        "properties": {
            "name": {"type": "string", "title": "Your name", "minLength": 2, "maxLength": 40},
            "email": {"type": "string", "title": "Email", "format": "email", "description": "Where we write."},
            "site": {"type": "string", "title": "Web site", "format": "uri"},
            "born": {"type": "string", "title": "Birthday", "format": "date"},
            "call_at": {"type": "string", "title": "Call me at", "format": "date-time"},
            "age": {"type": "integer", "title": "Age", "minimum": 18, "maximum": 130},
            "budget": {"type": "number", "title": "Budget", "minimum": 0.5, "default": 10.5},
            "subscribe": {"type": "boolean", "title": "Subscribe", "default": True},
            "size": {"type": "string", "title": "Size", "enum": ["s", "m", "l"], "default": "m"},
            "colour": {
                "type": "string",
                "title": "Colour",
                "oneOf": [{"const": "r", "title": "Red"}, {"const": "g", "title": "Green"}],
            },
            "toppings": {
                "type": "array",
                "title": "Toppings",
                "items": {"anyOf": [{"const": "ham", "title": "Ham"}, {"const": "egg", "title": "Egg"}]},
                "maxItems": 1,
            },
        },
        "required": ["name", "email", "age", "colour"],
    },
    "order": {
        "type": "object",
        "properties": {
            "name": {"type": "string", "title": "Name on the order"},
            "quantity": {"type": "integer", "title": "Quantity", "minimum": 1, "maximum": 20, "default": 1},
            "size": {
                "type": "string",
                "title": "Size",
                "oneOf": [{"const": "s", "title": "Small"}, {"const": "m", "title": "Medium"}],
                "default": "m",
            },
            "gift": {"type": "boolean", "title": "Wrap as a gift", "description": "Adds a card, no charge."},
        },
        "required": ["name", "quantity"],
    },
    "hostile": {
        "type": "object",
        "properties": {
            "x": {
                "type": "string",
                "title": "<script>alert('title')</script><img src=x onerror=alert(1)>",
                "description": "<b onmouseover=alert(2)>bold</b> <a href='javascript:alert(3)'>link</a>",
            }
        },
    },
    "nested": {"type": "object", "properties": {"inner": {"type": "object", "properties": {}}}},
    "huge": {"type": "object", "properties": {f"f{i}": {"type": "string", "title": "x" * 900} for i in range(60)}},
}

BANK = "https://bank.example/login?next=/pay"
MESSAGE = "Tell me about you <script>alert('message')</script>"


def modern(ctx: Context) -> bool:
    return str(ctx.request_context.session.protocol_version or "") >= "2026"


def _said(result: Any, ctx: Context) -> CallToolResult:
    if isinstance(result, dict):
        result = ElicitResult.model_validate(result)
    era = "mrtr" if modern(ctx) else "handshake"
    text = f"{era} {result.action}: {json.dumps(result.content, sort_keys=True)}"
    return CallToolResult(content=[TextContent(type="text", text=text)])


async def _ask(ctx: Context, form: str, message: str) -> CallToolResult | InputRequiredResult:
    schema = SCHEMAS[form]
    if modern(ctx):
        responses = ctx.input_responses or {}
        if "q" not in responses:
            params = ElicitRequestFormParams(message=message, requested_schema=schema)
            return InputRequiredResult(input_requests={"q": ElicitRequest(params=params)})
        return _said(responses["q"], ctx)
    said = await ctx.request_context.session.elicit_form(message, schema, related_request_id=ctx.request_id)
    return _said(said, ctx)


@server.tool()
async def ask(ctx: Context, form: str = "contact") -> CallToolResult | InputRequiredResult:
    """Ask the user to fill in a form (contact, hostile, nested, huge) and say what came back."""
    return await _ask(ctx, form, MESSAGE)


@server.tool()
async def two(ctx: Context) -> CallToolResult | InputRequiredResult:
    """2026-07-28 only: two questions in one InputRequiredResult."""
    responses = ctx.input_responses or {}
    if not responses:
        first = ElicitRequestFormParams(message="First?", requested_schema=SCHEMAS["order"])
        second = ElicitRequestFormParams(message="Second?", requested_schema=SCHEMAS["order"])
        return InputRequiredResult(input_requests={"a": ElicitRequest(params=first), "b": ElicitRequest(params=second)})
    said = {key: ElicitResult.model_validate(value, from_attributes=True).action for key, value in responses.items()}
    return CallToolResult(content=[TextContent(type="text", text=json.dumps(said, sort_keys=True))])


@server.tool()
async def order(ctx: Context) -> CallToolResult | InputRequiredResult:
    """Ask for the details of an order."""
    return await _ask(ctx, "order", "Who is the order for, and how many?")


@server.tool()
async def visit(
    ctx: Context, url: str = "https://bank.example/login?next=/pay"
) -> CallToolResult | InputRequiredResult:
    """Ask the user to open a page and say when they are done."""
    if modern(ctx):
        responses = ctx.input_responses or {}
        if "v" not in responses:
            params = ElicitRequestURLParams(message="Sign in at the bank.", url=url, elicitation_id="visit-1")
            return InputRequiredResult(input_requests={"v": ElicitRequest(params=params)})
        return _said(responses["v"], ctx)
    said = await ctx.request_context.session.elicit_url(
        "Sign in at the bank.", url, "visit-1", related_request_id=ctx.request_id
    )
    return _said(said, ctx)


@server.tool()
async def visit_and_finish(url: str, ctx: Context) -> str:
    """Handshake era: ask for a page, and finish it on the server's side after a moment (the
    `notifications/elicitation/complete` a server sends when the page was done)."""
    session = ctx.request_context.session
    elicitation_id = "finish-1"

    async def finish() -> None:
        await anyio.sleep(1.0)
        await session.send_elicit_complete(elicitation_id, related_request_id=ctx.request_id)

    async with anyio.create_task_group() as tg:
        tg.start_soon(finish)
        said = await session.elicit_url("Pay at the shop.", url, elicitation_id, related_request_id=ctx.request_id)
    return said.action


@server.tool()
async def visit_named(url: str, elicitation_id: str, finish_after: float, ctx: Context) -> str:
    """Handshake era: ask for a page under the given id; finish it `finish_after` seconds later
    (0: never, the person must)."""
    session = ctx.request_context.session

    async def finish() -> None:
        await anyio.sleep(finish_after)
        await session.send_elicit_complete(elicitation_id, related_request_id=ctx.request_id)

    async with anyio.create_task_group() as tg:
        if finish_after > 0:
            tg.start_soon(finish)
        said = await session.elicit_url("Pay at the shop.", url, elicitation_id, related_request_id=ctx.request_id)
    return said.action


@server.tool()
async def finish_page(elicitation_id: str, ctx: Context) -> str:
    """Says a page was finished, whoever asked it (what a hostile server would send)."""
    await ctx.request_context.session.send_elicit_complete(elicitation_id, related_request_id=ctx.request_id)
    return "sent"


def http(port: int) -> None:
    import uvicorn

    uvicorn.run(
        server.streamable_http_app(), host="127.0.0.1", port=port, log_level="warning", timeout_graceful_shutdown=1
    )


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "http":
        http(int(sys.argv[2]))
    else:
        server.run("stdio")
