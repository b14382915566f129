"""The Files toolset: the agent lists, reads and searches the calling user's attached files.
Every query is filtered by `ctx.user_id`; another user's file id reads as a missing one."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from toolsets.base import ToolContext, Toolset, plural, tool
from toolsets.sources import source

from . import reading
from .models import Attachment

Scope = Literal["chat", "all"]


def _list_summary(result: dict[str, Any]) -> str:
    return plural(result["count"], "file") if result["count"] else "No files"


@tool(
    display_name="List files",
    timeout_s=10,
    summarize=_list_summary,
    status_text=lambda args: "Listing all your files…" if args.get("scope") == "all" else "Listing this chat's files…",
)
def list_files(
    ctx: ToolContext, scope: Annotated[Scope, "This chat's files, or all of yours"] = "chat"
) -> dict[str, Any]:
    """List the files attached in this chat, or all of your files, with their ids."""
    files = reading.owned(ctx.user_id).filter(message__isnull=False).defer("text", "thumbnail")
    chat_id = ctx.chat_id if scope == "chat" else None
    if scope == "chat":
        if chat_id is None:
            scope = "all"  # called from the API: there is no chat, so every file is this one's
        else:
            files = files.filter(chat_id=chat_id)
    found = [reading.describe(a) for a in files.order_by("-id")[:200]]
    return {"scope": scope, "files": found, "count": len(found)}


def pages_text(result: dict[str, Any]) -> str:
    """ "page 2 of 5" or "pages 1–2 of 5" for a read; "" for a file without pages."""
    if not result.get("pages"):
        return ""
    first, last = result.get("page") or result.get("first_page"), result.get("page") or result.get("last_page")
    span = f"page {first}" if first == last else f"pages {first}–{last}"
    return f"{span} of {result['pages']}"


def _range_text(result: dict[str, Any]) -> str:
    where = f"{pages_text(result)}, " if result.get("pages") else ""
    return (
        f"{result['name']}: {where}characters {result['start']:,}–{result['end']:,} of {result['total_characters']:,}"
    )


def _read_status(args: dict[str, Any]) -> str:
    where = f", page {args['page']}" if args.get("page") else ""
    start = f", from character {args['start']:,}" if isinstance(args.get("start"), int) and args["start"] else ""
    return f"Reading file #{args.get('file_id', '')}{where}{start}…"


def _read_sources(result: dict[str, Any]) -> list[dict[str, str]]:
    page = ", " + pages_text(result).rpartition(" of ")[0] if result.get("pages") else ""
    return [
        source(
            f"{result['name']}{page}",
            url=result["link"],
            kind="File",
            snippet=result["text"][:300],
            key=f"file:{result['file_id']}:{result['start']}:{result['end']}",
        )
    ]


@tool(
    display_name="Read file",
    timeout_s=15,
    summarize=_range_text,
    status_text=_read_status,
    sources=_read_sources,
)
def read_file(
    ctx: ToolContext,
    file_id: Annotated[int, "The file's id, from list_files"],
    page: Annotated[int | None, "A page to read (PDFs), from 1; omit to read by characters"] = None,
    start: Annotated[int | None, "The first character to read (within the page, when a page is given)"] = None,
    length: Annotated[int | None, "How many characters to read, at most 20000 (default 8000)"] = None,
) -> dict[str, Any]:
    """Read part of one of your files: a page, or a range of characters."""
    attachment = reading.get_file(ctx.user_id, file_id)
    return reading.read_range(attachment, page, start, length)


def _search_summary(result: dict[str, Any]) -> str:
    if not result["count"]:
        return f"Nothing for “{result['query']}”"
    return f"{plural(result['count'], 'passage')} for “{result['query']}”"


def _search_sources(result: dict[str, Any]) -> list[dict[str, str]]:
    return [
        source(
            f"{hit['name']}" + (f", page {hit['page']}" if hit.get("page") else ""),
            url=hit["link"],
            kind="File",
            snippet=hit["passage"],
            key=f"file:{hit['file_id']}:{hit['start']}:{hit['end']}",
        )
        for hit in result["passages"]
    ]


@tool(
    display_name="Search files",
    timeout_s=20,
    summarize=_search_summary,
    status_text=lambda args: f"Searching your files for “{args.get('query', '')}”…",
    sources=_search_sources,
)
def search_files(
    ctx: ToolContext,
    query: Annotated[str, "Words to look for"],
    scope: Annotated[Scope, "This chat's files, or all of yours"] = "all",
    limit: Annotated[int, "At most this many passages (1-20)"] = 8,
) -> dict[str, Any]:
    """Find passages in your files that contain the given words."""
    files = reading.owned(ctx.user_id).filter(message__isnull=False)
    if scope == "chat" and ctx.chat_id is not None:
        files = files.filter(chat_id=ctx.chat_id)
    passages = reading.search(files, query[:500], max(1, min(limit, 20)))
    return {"query": query[:500], "passages": passages, "count": len(passages)}


toolset = Toolset(
    id="files",
    name="Files",
    description="Read the documents and images you attach: list them, read a page or a range, search across them.",
    tools=[list_files, read_file, search_files],
)

__all__ = ["Attachment", "toolset"]
