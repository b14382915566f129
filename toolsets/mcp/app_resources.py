"""MCP Apps' pages (`ui://` resources of type `text/html;profile=mcp-app`), fetched from a
server when its tools are listed, and kept like its tool definitions.

A page is as untrusted as a definition: read through the server's own connection, refused past
a size bound, its `_meta.ui` (the domains it says it needs, the browser features it asks for)
reduced to what Tessera understands and can check, and stored by its hash. The tool's stored
definition carries that hash, so a page that changes changes the definition, and the tool is
held until an admin reviews it (`MCPServer.held_tools`), like any changed tool.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import json
import logging
import re
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from mcp.client.extension import ClientExtension
from mcp.shared.exceptions import MCPError

from . import stdio_guard
from .errors import describe
from .untrusted import clean_text

log = logging.getLogger(__name__)

MIME_TYPE = "text/html;profile=mcp-app"
# The extension's name, declared in the client's capabilities (SEP-1724 extensions).
EXTENSION = "io.modelcontextprotocol/ui"
MAX_RESOURCES = 20
# How long the pages of one listing may take to arrive, together. An oversized page is refused
# as it streams in (stdio_guard.py for stdio, bounded.py over HTTP); a slow page is cut off here.
PAGES_BUDGET_S = 10.0
MAX_DOMAINS = 20
# A host's first label; "app-…" is kept for the labels Tessera makes itself.
_LABEL = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
CSP_KEYS = ("connectDomains", "resourceDomains", "frameDomains", "baseUriDomains")
PERMISSIONS = ("camera", "microphone", "geolocation", "clipboardWrite")
# An origin as a CSP source: a scheme, a host (its first label may be `*`), an optional port.
# Nothing else: no paths, quotes, keywords (`'unsafe-eval'`), bare `*` or schemes alone, so a
# declared domain can never widen a directive beyond that host.
_ORIGIN = re.compile(
    r"^(https|wss|http|ws)://(\*\.)?[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*(:\d{1,5})?$"
)


class Extension(ClientExtension):
    """Tells a server Tessera shows its pages, so a server that offers its tools with or
    without a UI (the spec's graceful degradation) offers them with one."""

    identifier = EXTENSION

    def settings(self) -> dict[str, Any]:
        return {"mimeTypes": [MIME_TYPE]}


class Refused(ValueError):
    """A page Tessera will not keep: the reason, for the admin."""


class Refusal(str):
    """Why a page was refused for what it is (too large, not a page), not for a passing failure
    of its server: the tool's card says so (toolsets.mcp.catalog keeps it with the tool)."""


@dataclass
class Page:
    uri: str
    html: str
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def sha256(self) -> str:
        digest = hashlib.sha256(self.html.encode())
        digest.update(json.dumps(self.meta, sort_keys=True).encode())
        return digest.hexdigest()


def max_bytes() -> int:
    return int(settings.TESSERA["MCP_APP_MAX_BYTES"])


def too_large_text(limit: int | None = None) -> str:
    return f"it is larger than {(limit or max_bytes()) / 1_000_000:g} MB, the most a page may be"


def wanted(tools: list[dict[str, Any]]) -> list[str]:
    """The distinct pages the listed tools name (raw `tools/list` items), bounded."""
    from .untrusted import ui_meta

    uris: list[str] = []
    for tool in tools:
        uri = ui_meta(tool.get("_meta") if isinstance(tool, dict) else None).get("resourceUri")
        if uri and uri not in uris:
            uris.append(uri)
    return uris[:MAX_RESOURCES]


async def read_all(client: Any, tools: list[dict[str, Any]]) -> dict[str, Page | str]:
    """Each page the tools name, read with `resources/read` on `client` (an `mcp.Client`), or
    why it was refused; all within PAGES_BUDGET_S."""
    found: dict[str, Page | str] = {}
    loop = asyncio.get_running_loop()
    deadline = loop.time() + PAGES_BUDGET_S
    for uri in wanted(tools):
        try:
            async with asyncio.timeout(max(0.1, deadline - loop.time())):
                result = await client.read_resource(uri)
            found[uri] = page(uri, result.model_dump(by_alias=True, mode="json", exclude_none=True))
        except Refused as exc:
            found[uri] = Refusal(str(exc))
        except MCPError as exc:
            # Refused as it streamed in: a stdio or JSON answer (stdio_guard, bounded), an event.
            too_large = exc.data == stdio_guard.REFUSED or "byte limit" in str(exc)
            found[uri] = Refusal(too_large_text()) if too_large else f"reading it failed ({describe(exc)})"
        except TimeoutError:
            found[uri] = f"it did not arrive within {PAGES_BUDGET_S:g} s, as a page larger than Tessera keeps would not"
        except Exception as exc:  # the server failed this read: the tool keeps its plain card
            found[uri] = f"reading it failed ({describe(exc)})"
    return found


def page(uri: str, result: dict[str, Any], limit: int | None = None) -> Page:
    """The page in a `resources/read` result (dumped JSON). Raises Refused."""
    limit = max_bytes() if limit is None else limit
    contents = result.get("contents")
    items = [c for c in contents if isinstance(c, dict)] if isinstance(contents, list) else []
    item = next((c for c in items if c.get("uri") == uri), items[0] if items else None)
    if item is None:
        raise Refused("the server returned no contents for it")
    mime = str(item.get("mimeType") or "").replace(" ", "").lower()
    if mime != MIME_TYPE:
        raise Refused(f"its type is {clean_text(mime, 80) or 'not given'}, not {MIME_TYPE}")
    if isinstance(item.get("text"), str):
        text: str = item["text"]
        # A character is at most four bytes: a cheap bound before encoding a huge string.
        if len(text) > limit or len(text.encode()) > limit:
            raise Refused(too_large_text(limit))
        html = text
    elif isinstance(item.get("blob"), str):
        blob: str = item["blob"]
        if len(blob) * 3 // 4 > limit:
            raise Refused(too_large_text(limit))
        try:
            html = base64.b64decode(blob, validate=True).decode()
        except (binascii.Error, ValueError):
            raise Refused("its contents are not valid base64 of UTF-8 text") from None
    else:
        raise Refused("it has neither text nor data")
    if not html.strip():
        raise Refused("it is empty")
    meta = item.get("_meta")
    return Page(uri, html, clean_meta(meta.get("ui") if isinstance(meta, dict) else None))


def clean_meta(ui: Any) -> dict[str, Any]:
    """A page's `_meta.ui`: the declared domains that are plain origins, the permissions
    Tessera knows, the border preference, and the first label of the dedicated origin it asks
    for (`domain`: Tessera gives it `<label>.` its sandbox's wildcard host, see
    `app_sandbox.sandbox_origin`, unless another server asks for the same). Anything else is
    dropped."""
    if not isinstance(ui, dict):
        return {}
    cleaned: dict[str, Any] = {}
    csp = ui.get("csp")
    if isinstance(csp, dict):
        domains = {key: origins(csp.get(key)) for key in CSP_KEYS}
        domains = {key: value for key, value in domains.items() if value}
        if domains:
            cleaned["csp"] = domains
    permissions = ui.get("permissions")
    if isinstance(permissions, dict):
        granted = sorted(p for p in PERMISSIONS if isinstance(permissions.get(p), dict))
        if granted:
            cleaned["permissions"] = granted
    if isinstance(ui.get("prefersBorder"), bool):
        cleaned["prefersBorder"] = ui["prefersBorder"]
    domain = ui.get("domain")
    if isinstance(domain, str):
        # "weather", "weather.apps.example.com" or "https://weather.apps.example.com": its first label.
        first = domain.strip().lower().removeprefix("https://").removeprefix("http://").partition(".")[0]
        if _LABEL.match(first) and not first.startswith("app-"):
            cleaned["domain"] = first
    return cleaned


def origins(value: Any) -> list[str]:
    """The entries of a declared domain list that are plain origins (see `_ORIGIN`)."""
    if not isinstance(value, list):
        return []
    kept: list[str] = []
    for item in value:
        if isinstance(item, str):
            origin = item.strip().lower().rstrip("/")
            if _ORIGIN.match(origin) and origin not in kept:
                kept.append(origin)
    return kept[:MAX_DOMAINS]
