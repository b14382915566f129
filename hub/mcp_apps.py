"""Tessera's cards as MCP Apps (extension `io.modelcontextprotocol/ui`, stable 2026-01-26) at `/mcp`.

For a client that negotiated the extension (its capabilities name it, with the
`text/html;profile=mcp-app` MIME type):

- `tools/list` names, in a tool's `_meta.ui.resourceUri`, the `ui://tessera/…` card its result
  shows (hub/mcp_cards.py says which), and marks a tool that will wait for its owner's approval
  (`_meta["tessera/asks"]`); one app-only tool (`visibility: ["app"]`: a host never offers it to a
  model) lets the approval card find the request its call waits on.
- `resources/list` and `resources/read` serve the cards: one self-contained HTML document each,
  with Tessera's own card stylesheets (static/css/theme.css, cards.css) and the View's script
  (frontend/mcp_app/view.js, bundled with the official View side by `npm run build`) inline. It
  fetches nothing, so its declared CSP is empty: the host's default-deny policy stands, and the
  document repeats it in a `<meta>` of its own.
- `tools/call` adds the card, rendered on the server from the page's own partials, to the result's
  `_meta["tessera/card"]`: the View places it. The content and structured content are as before.

A client that did not negotiate the extension sees exactly what it saw before: no `_meta`, no
resources listed, no extra tool. Without the built View (DEBUG without `npm run build`), nothing
is offered either, and the log says why.
"""

from __future__ import annotations

import html
import logging
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any

import mcp_types as types
from django.conf import settings
from django.urls import reverse
from mcp.server.apps import APP_MIME_TYPE, EXTENSION_ID, client_supports_apps

from core import questions
from toolsets.policy import approval as approval_mod

from . import mcp_cards
from .mcp_cards import APPROVAL, CARDS, Card

log = logging.getLogger(__name__)

CARD_KEY = "tessera/card"
ASKS_KEY = "tessera/asks"
APPROVAL_TOOL = "tessera__approval_card"
# The View's own policy, as strict as the host's default: its script and styles are inline, its
# cards' images are none, and it connects nowhere (links open through the host).
VIEW_CSP = (
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; "
    "connect-src 'none'; frame-src 'none'; object-src 'none'; base-uri 'none'; form-action 'none'"
)
# Declared to the host: nothing beyond the document itself (each list empty: no domain at all).
RESOURCE_UI: dict[str, Any] = {
    "csp": {"connectDomains": [], "resourceDomains": [], "frameDomains": [], "baseUriDomains": []},
    # The card draws its own border and background, as on the page.
    "prefersBorder": False,
}


# Tessera's colours and card styles, as the page has them, then the View's own frame.
STYLESHEETS = (("static", "css", "theme.css"), ("static", "css", "cards.css"), ("frontend", "mcp_app", "view.css"))


def _view_script() -> Path:
    return Path(settings.BASE_DIR) / "build" / "mcp_app" / "view.js"


def available() -> bool:
    """Whether the View is built (`npm run build`; `make static` and the test set-up run it)."""
    found = _view_script().is_file()
    if not found:
        _warn_once()
    return found


@cache
def _warn_once() -> None:
    log.warning("Tessera's MCP App View is not built (npm run build): /mcp offers no cards.")


def negotiated(ctx: Any) -> bool:
    """Whether this request's client declared MCP Apps (and the View exists to serve)."""
    try:
        declared = client_supports_apps(ctx)
    except AttributeError:  # a request without a session (never on /mcp's own path)
        return False
    return declared and available()


# --- tools/list ---------------------------------------------------------------------------------


def with_card(listed: types.Tool, toolset_id: str, tool: Any, *, asks: bool) -> types.Tool:
    """The tool as a client with the extension sees it: the card its result shows, and whether
    it will wait for its owner's approval."""
    card = mcp_cards.card_for(toolset_id, tool, asks=asks)
    if card is None:
        return listed
    meta: dict[str, Any] = {"ui": {"resourceUri": card.uri}}
    if asks:
        meta[ASKS_KEY] = True
    return listed.model_copy(update={"meta": meta})


def approval_tool() -> types.Tool:
    """The approval card's own tool: only the View calls it, to show what its call waits for."""
    return types.Tool(
        name=APPROVAL_TOOL,
        title="Tessera: approval card",
        description="The approval a call of this user's waits for, as a card (for Tessera's approval View).",
        input_schema={
            "type": "object",
            "properties": {
                "tool": {"type": "string", "description": "The waiting call's tool."},
                "arguments": {"type": "object", "description": "The waiting call's arguments."},
            },
            "required": ["tool"],
        },
        annotations=types.ToolAnnotations(title="Approval card", read_only_hint=True, open_world_hint=False),
        _meta={"ui": {"resourceUri": CARDS[APPROVAL].uri, "visibility": ["app"]}},
    )


# --- resources ----------------------------------------------------------------------------------


def _resource(card: Card) -> types.Resource:
    return types.Resource(
        uri=card.uri,
        name=card.uri.removeprefix("ui://"),
        title=f"Tessera: {card.title}",
        description=card.description,
        mime_type=APP_MIME_TYPE,
        _meta={"ui": RESOURCE_UI},
    )


async def list_resources(ctx: Any, params: Any) -> types.ListResourcesResult:
    # The cards are all the resources this server has; a client without the extension has no use
    # for them (and never had any listed).
    found = [_resource(card) for card in CARDS.values()] if negotiated(ctx) else []
    return types.ListResourcesResult(resources=found)


async def read_resource(ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
    card = mcp_cards.BY_URI.get(str(params.uri))
    if card is None or not available():
        raise ValueError(f"No such resource: {str(params.uri)[:200]}")
    content = types.TextResourceContents(
        uri=card.uri, mime_type=APP_MIME_TYPE, text=document(card), _meta={"ui": RESOURCE_UI}
    )
    return types.ReadResourceResult(contents=[content])


def _read(*parts: str) -> str:
    return (Path(settings.BASE_DIR).joinpath(*parts)).read_text(encoding="utf-8")


def document(card: Card) -> str:
    """The card's View: one HTML5 document with everything inline (kept per process and View build)."""
    script = _view_script()
    return _document(card.kind, script.stat().st_mtime_ns)


@cache
def _document(kind: str, built: int) -> str:
    card = CARDS[kind]
    styles = "\n".join(_read(*path) for path in STYLESHEETS)
    script = _view_script().read_text(encoding="utf-8")
    # Inline text must not end its element early (the bundle and the stylesheets never contain
    # these, but a check costs nothing).
    if "</script" in script.lower() or "</style" in styles.lower():
        raise ValueError("The View's inline script or styles would close their element.")
    return (
        '<!doctype html>\n<html lang="en" data-theme="auto" data-card="'
        + html.escape(kind)
        + '">\n<head>\n<meta charset="utf-8">\n'
        + f'<meta http-equiv="Content-Security-Policy" content="{html.escape(VIEW_CSP, quote=False)}">\n'
        + '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        + f"<title>Tessera: {html.escape(card.title)}</title>\n<style>\n{styles}\n</style>\n</head>\n<body>\n"
        + '<main id="card" aria-live="polite"></main>\n<p id="status" class="view-status" role="status"></p>\n'
        + f"<script>\n{script}\n</script>\n</body>\n</html>\n"
    )


# --- tools/call ---------------------------------------------------------------------------------


def card_meta(name: str, result: Any, sources: Sequence[Mapping[str, Any]], base_url: str) -> dict[str, Any] | None:
    """The result's card for the View (the component, then the sources), or None."""
    toolset_id, _, tool_name = name.removeprefix("toolset__").partition("__")
    parts = [mcp_cards.component_html(toolset_id, tool_name, result), mcp_cards.sources_html(sources, base_url)]
    shown = "\n".join(part for part in parts if part)
    return {CARD_KEY: {"html": shown}} if shown else None


async def approval_card(
    user_id: int, client: str, arguments: dict[str, Any], base_url: str, redis: Any
) -> types.CallToolResult:
    """The approval this user's call of `tool` with these arguments waits for, as the approval
    card (in `_meta`, as every card), or a result saying none waits. Only this user's requests
    from this very client are looked at, and only one that matches the call exactly is shown."""
    tool, wanted = arguments.get("tool"), arguments.get("arguments") or {}
    if not isinstance(tool, str) or not isinstance(wanted, dict):
        return types.CallToolResult(
            content=[types.TextContent(text="validation_error: 'tool' must be a string, 'arguments' an object.")],
            is_error=True,
        )
    found: dict[str, Any] | None = None
    # Questions are keyed by id alone (core.questions): a SCAN over their prefix finds this
    # user's. It runs only while a View shows a waiting call (every few seconds); an index per
    # user would spare the scan on a Redis holding very many keys.
    async for key in redis.scan_iter(match=f"{questions.PREFIX}:*", count=200):
        key = key.decode() if isinstance(key, bytes) else key
        if key.endswith(":answer"):
            continue
        asked = await questions.find(redis, key.rsplit(":", 1)[-1])
        if asked is None or asked.kind != approval_mod.KIND or asked.owner_id != user_id:
            continue
        meta = {**asked.payload, "id": asked.id, "deadline": asked.deadline}
        if (
            meta.get("chat_id") is not None
            or meta.get("client") != client
            or meta.get("name") != tool
            or meta.get("arguments") != wanted
            or await redis.exists(questions.answer_key(asked.id))
        ):
            continue
        if found is None or float(meta.get("deadline") or 0) > float(found.get("deadline") or 0):
            found = meta
    if found is None or float(found.get("deadline") or 0) < time.time():
        return types.CallToolResult(content=[types.TextContent(text="No call of this tool waits for approval.")])
    deadline = datetime.fromtimestamp(float(found["deadline"]), UTC)
    shown = {**found, "deadline_iso": deadline.isoformat(), "deadline_text": deadline.strftime("%H:%M UTC")}
    link = base_url.rstrip("/") + reverse("chat:approval_review", args=[found["id"]])
    return types.CallToolResult(
        content=[types.TextContent(text=f"{found.get('display_name') or tool} waits for approval: {link}")],
        _meta={CARD_KEY: {"html": mcp_cards.approval_html(shown, link)}},
    )


# Advertised in the server's capabilities (no settings of its own: the spec defines none).
EXTENSION: dict[str, dict[str, Any]] = {EXTENSION_ID: {}}
