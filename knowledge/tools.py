"""The Knowledge toolset: search the knowledge bases the caller may see, and read a passage or a
document by its handle. Every call checks the caller's groups afresh (knowledge.access), so the
same rules hold in a chat, a subagent, /v1 and /mcp."""

from __future__ import annotations

from typing import Annotated, Any

from toolsets.base import ToolContext, Toolset, plural, tool
from toolsets.sources import source

from . import access, retrieval


def _search_summary(result: dict[str, Any]) -> str:
    mode = f" · {result['retrieval']}" if result.get("retrieval") else ""
    if not result["count"]:
        return f"Nothing for “{result['query']}”{mode}"
    return f"{plural(result['count'], 'passage')} for “{result['query']}”{mode}"


def _label(item: dict[str, Any]) -> str:
    where = f" › {item['heading']}" if item.get("heading") else ""
    page = f", page {item['page']}" if item.get("page") else ""
    return f"{item['title']}{where}{page}"


def _search_sources(result: dict[str, Any]) -> list[dict[str, str]]:
    return [
        source(_label(hit), url=hit["link"], kind="Knowledge", snippet=hit["text"], key=f"knowledge:{hit['handle']}")
        for hit in result["passages"]
    ]


def _read_sources(result: dict[str, Any]) -> list[dict[str, str]]:
    key = f"knowledge:{result['handle']}" + (f":{result['page']}" if result.get("pages") else "")
    return [source(_label(result), url=result["link"], kind="Knowledge", snippet=result["text"], key=key)]


@tool(
    display_name="Search knowledge",
    timeout_s=20,
    summarize=_search_summary,
    status_text=lambda args: f"Searching knowledge for “{args.get('query', '')}”…",
    sources=_search_sources,
)
def search_knowledge(
    ctx: ToolContext,
    query: Annotated[str, "What to look for, in the words the documents would use"],
    bases: Annotated[
        list[int] | None, "Only these knowledge base ids (default: the chat's, else all you can see)"
    ] = None,
    documents: Annotated[list[int] | None, "Only these document ids (the number of a handle like d45)"] = None,
    limit: Annotated[int, "At most this many passages (1-20)"] = 8,
) -> dict[str, Any]:
    """Search the team's knowledge bases and return matching passages with handles to read."""
    within = ctx.scope.get("knowledge_bases")
    return retrieval.search(
        ctx.user_id, query, chat_id=ctx.chat_id, bases=bases, documents=documents, limit=limit, within=within
    )


@tool(
    display_name="Read knowledge",
    timeout_s=15,
    summarize=lambda result: (
        _label(result) + (f" (page {result['page']} of {result['pages']})" if result.get("pages") else "")
    ),
    status_text=lambda args: f"Reading {args.get('handle', '')}…",
    sources=_read_sources,
)
def read_knowledge(
    ctx: ToolContext,
    handle: Annotated[str, "A passage handle (p123) or a document handle (d45) from search_knowledge"],
    page: Annotated[int, "For a document: the page to read, from 1"] = 1,
) -> dict[str, Any]:
    """Read a passage, or a document a page at a time, from a knowledge base."""
    return retrieval.read(ctx.user_id, handle, page)


toolset = Toolset(
    id="knowledge",
    name="Knowledge",
    description="Search the knowledge bases you and your groups keep, and read their documents.",
    tools=[search_knowledge, read_knowledge],
    # Searching nothing wastes the model's step: offered only to a user who can see a base.
    offered_to=lambda user_id: access.visible(user_id).exists(),
)
