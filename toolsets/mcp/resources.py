"""A server's resources as context for a message: listed (resources and resource templates),
read with `resources/read` when the user attaches one, and stored as the user's own files, so
a message carries them like an upload — a chip on the message, images shown to a model that
sees them, text read by the Files tools — and a reload shows the same.

Everything the server sends is untrusted: URIs must be printable and short, names are cleaned,
contents are size-checked against the admin's file limits and typed by their bytes (the Files
app's detection), never by the server's word.
"""

from __future__ import annotations

import base64
import binascii
import mimetypes
from dataclasses import dataclass
from typing import Any

from django.core.files.uploadedfile import SimpleUploadedFile
from mcp.shared.exceptions import MCPError
from mcp.shared.uri_template import InvalidUriTemplate, UriTemplate
from mcp_types import INVALID_PARAMS

from toolsets.base import ToolFailure
from toolsets.files import attach
from toolsets.files.models import Attachment, FileLimits

from .lists import MAX_ARGUMENT_LENGTH, Source, cached_list, request
from .untrusted import clean_text

MAX_URI = 2000
MAX_VARIABLES = 10
# One read may return several contents (a directory, say): each becomes a file.
MAX_CONTENTS = 10
# "Resource not found": -32002 up to the 2025-11-25 revision, invalid params from 2026-07-28 on.
NOT_FOUND_CODES = (-32002, INVALID_PARAMS)


class NotFound(ToolFailure):
    """The server says it has no such resource (any more)."""


class Unusable(ValueError):
    """What the user asked for cannot be attached: the reason, for them."""


@dataclass(frozen=True)
class Listed:
    server: str
    server_name: str
    uri: str
    name: str
    description: str
    mime_type: str


@dataclass(frozen=True)
class Template:
    server: str
    server_name: str
    uri_template: str
    name: str
    description: str
    variables: tuple[str, ...]


def valid_uri(uri: str) -> bool:
    return bool(uri) and len(uri) <= MAX_URI and uri.isprintable() and ":" in uri


async def list_resources(found: list[Source], user_id: int) -> tuple[list[Listed], list[Template], list[str]]:
    """The resources and templates of every server in `found`, and a note per failing server."""
    listed: list[Listed] = []
    templates: list[Template] = []
    problems: list[str] = []
    for item in found:
        try:
            resources = await cached_list(item, user_id, "resources/list", "resources")
            shapes = await cached_list(item, user_id, "resources/templates/list", "resourceTemplates")
        except Exception as exc:  # ToolFailure, or a server that lists one but not the other
            problems.append(str(exc))
            continue
        for r in resources:
            uri = r.get("uri")
            if isinstance(uri, str) and valid_uri(uri):
                listed.append(
                    Listed(
                        item.slug,
                        item.server.name,
                        uri,
                        clean_text(r.get("title") or r.get("name"), 120) or uri,
                        clean_text(r.get("description"), 300),
                        clean_text(r.get("mimeType"), 100),
                    )
                )
        for t in shapes:
            template = _template(item, t)
            if template is not None:
                templates.append(template)
    return listed, templates, problems


def _template(found: Source, item: dict[str, Any]) -> Template | None:
    raw = item.get("uriTemplate")
    if not isinstance(raw, str) or not valid_uri(raw):
        return None
    try:
        parsed = UriTemplate.parse(raw)
    except InvalidUriTemplate:
        return None
    if len(parsed.variable_names) > MAX_VARIABLES:
        return None  # a form that long is not a picker's job
    names = tuple(parsed.variable_names)
    return Template(
        found.slug,
        found.server.name,
        raw,
        clean_text(item.get("title") or item.get("name"), 120) or raw,
        clean_text(item.get("description"), 300),
        tuple(str(n) for n in names),
    )


def expand(template: Template, values: dict[str, str]) -> tuple[str, dict[str, str]]:
    """The URI the template makes with `values`, or errors per variable."""
    errors: dict[str, str] = {}
    for name in template.variables:
        value = values.get(name, "")
        if not value.strip():
            errors[name] = f"{name} is required."
        elif len(value) > MAX_ARGUMENT_LENGTH or not value.isprintable():
            errors[name] = "This value cannot be used in an address."
    if errors:
        return "", errors
    uri = UriTemplate.parse(template.uri_template).expand({n: values[n] for n in template.variables})
    if not valid_uri(uri):
        return "", {template.variables[0] if template.variables else "uri": "The address this makes is not valid."}
    return uri, {}


async def read(found: Source, user_id: int, uri: str) -> list[dict[str, Any]]:
    """`resources/read`: the contents as the server returned them (dumped JSON). Raises NotFound
    when the server says the resource does not exist, ToolFailure for any other failure."""

    async def send(client: Any) -> Any:
        try:
            return await client.read_resource(uri)
        except MCPError as exc:
            if exc.code in NOT_FOUND_CODES:
                said = clean_text(exc.message, 200)
                # Servers mostly repeat the URI ("Unknown resource: …"): said once is enough.
                detail = "" if not said or uri in said else f" ({said})"
                raise NotFound(f"{found.server.name} has no resource {uri} any more{detail}.") from None
            raise

    raw = await request(found, user_id, send)
    contents = raw.get("contents")
    return [c for c in contents if isinstance(c, dict)][:MAX_CONTENTS] if isinstance(contents, list) else []


def store(user_id: int, found: Source, uri: str, name: str, contents: list[dict[str, Any]]) -> list[Attachment]:
    """Stores each content as the user's file (not yet on a message: the composer's chip carries
    its id, and sending claims it like an upload). Raises Unusable with the reason."""
    if not contents:
        raise Unusable(f"{found.server.name} returned nothing for {uri}.")
    limits = FileLimits.load()
    stored = []
    for content in contents:
        data, mime = content_bytes(content, limits)
        label = _file_name(name or uri, str(content.get("uri") or uri), mime, len(contents) > 1)
        upload = SimpleUploadedFile(label, data, content_type=mime or "application/octet-stream")
        try:
            stored.append(attach.accept(user_id, upload, limits))
        except attach.Refused as exc:
            # Binary contents Tessera cannot read (an archive, an executable): named, not kept.
            raise Unusable(f"“{label}” cannot be attached: {exc}") from None
    return stored


def content_bytes(content: dict[str, Any], limits: FileLimits) -> tuple[bytes, str]:
    mime = clean_text(content.get("mimeType"), 100)
    if isinstance(content.get("text"), str):
        text: str = content["text"]
        # Four bytes a character at most: a cheap bound before encoding a huge string.
        if len(text) > limits.max_file_bytes:
            raise Unusable(f"The resource is larger than {limits.max_file_mb} MB, the most a file may be.")
        data = text.encode()
        mime = mime if mime.startswith("text/") or mime.endswith(("json", "xml")) else "text/plain"
    elif isinstance(content.get("blob"), str):
        blob: str = content["blob"]
        if len(blob) * 3 // 4 > limits.max_file_bytes:
            raise Unusable(f"The resource is larger than {limits.max_file_mb} MB, the most a file may be.")
        try:
            data = base64.b64decode(blob, validate=True)
        except (binascii.Error, ValueError):
            raise Unusable("The server sent contents that are not valid base64.") from None
    else:
        raise Unusable("The server sent a resource with neither text nor data.")
    if not data:
        raise Unusable("The resource is empty.")
    if len(data) > limits.max_file_bytes:
        raise Unusable(f"The resource is larger than {limits.max_file_mb} MB, the most a file may be.")
    return data, mime


def _file_name(name: str, uri: str, mime: str, several: bool) -> str:
    base = clean_text(uri.rstrip("/").rsplit("/", 1)[-1] if several else name, 150) or "resource"
    if "." not in base.rsplit("/", 1)[-1][-6:]:
        ext = mimetypes.guess_extension(mime or "") or (".txt" if mime.startswith("text/") else "")
        base += ext or ""
    return attach.clean_name(base)
