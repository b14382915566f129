"""MCP failures as people read them: one redacted line, whatever the SDK raised (it raises
exception groups from its task groups)."""

from __future__ import annotations

import httpx2
from mcp.client.auth.exceptions import OAuthFlowError
from mcp.shared.exceptions import MCPError

from core import redact

from . import untrusted


class AuthRequired(Exception):
    """The server refused the caller's credential (or the OAuth grant needs renewing)."""


def leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in leaves(inner)]
    return [exc]


def auth_failure(exc: BaseException) -> bool:
    return any(isinstance(leaf, (OAuthFlowError, AuthRequired)) for leaf in leaves(exc))


def describe(exc: BaseException) -> str:
    """One line naming what went wrong, redacted (it reaches pages, the model and the database)."""
    leaf = leaves(exc)[0]
    if isinstance(leaf, MCPError):
        text = leaf.message
    elif isinstance(leaf, FileNotFoundError):
        text = f"command not found: {leaf.filename or leaf}"
    elif isinstance(leaf, httpx2.ConnectError):
        text = f"could not connect ({leaf})"
    elif isinstance(leaf, httpx2.HTTPStatusError):
        text = f"HTTP {leaf.response.status_code}"
    elif isinstance(leaf, TimeoutError):
        text = "timed out"
    else:
        text = f"{type(leaf).__name__}: {leaf}" if str(leaf) else type(leaf).__name__
    return redact.redact(untrusted.clean_text(text, 500).replace("\n", " ")) or type(leaf).__name__
