"""Searching and reading what a user may see, for the Knowledge tools. Plain data in, plain
data out: passages carry handles ("p123" a passage, "d45" a document) the read tool takes back.

Every lookup goes through `access.visible`: a base id, document id or handle of a base the caller
may not see reads exactly like one that does not exist.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from django.urls import reverse

from . import access, hybrid, lexical
from .models import ChatBase, Chunk, Document, KnowledgeBase

MAX_RESULTS = 20
PASSAGE_CHARS = 1200
READ_PAGE_CHARS = 8000
_HANDLE = re.compile(r"^\s*([pd])(\d{1,18})\s*$", re.IGNORECASE)


def passage_link(chunk: Chunk) -> str:
    return reverse("knowledge:document", args=[chunk.document_id]) + f"?passage={chunk.pk}#passage-{chunk.pk}"


def document_link(document: Document) -> str:
    return reverse("knowledge:document", args=[document.pk])


def bases_for(
    user_id: int | None, chat_id: int | None, wanted: Sequence[int] | None, within: Sequence[int] | None = None
) -> list[KnowledgeBase]:
    """The bases a search looks in: those asked for, else the chat's attached ones, else every
    base the user may see. Asking for one the user may not see is an error naming theirs. An
    agent with bases of its own (`within`) searches those only, of them only the ones the user
    may see: an agent never lends a base its user could not open."""
    visible = list(access.visible(user_id).order_by("name", "id"))
    if within:
        visible = [base for base in visible if base.pk in set(within)]
        if not visible:
            raise LookupError("None of this agent's knowledge bases is shared with you: ask their owner.")
        chat_id = None  # the agent's bases, not the chat's
    if not visible:
        raise LookupError("There are no knowledge bases you can search yet: create one on the Knowledge page.")
    if wanted:
        chosen = [base for base in visible if base.pk in set(wanted)]
        if len(chosen) < len(set(wanted)):
            names = ", ".join(f"{b.pk} ({b.name})" for b in visible[:20])
            raise LookupError(f"bases: no knowledge base with that id. The ones you can search: {names}.")
        return chosen
    if chat_id is not None:
        attached = set(ChatBase.objects.filter(chat_id=chat_id).values_list("base_id", flat=True))
        chosen = [base for base in visible if base.pk in attached]
        if chosen:
            return chosen
    return visible


def search(
    user_id: int | None,
    query: str,
    *,
    chat_id: int | None = None,
    bases: Sequence[int] | None = None,
    documents: Sequence[int] | None = None,
    limit: int = 8,
    within: Sequence[int] | None = None,
) -> dict[str, Any]:
    """`within`: the running agent's own bases (an admin attached them), the only ones searched."""
    words = lexical.terms(query)
    if not words:
        raise ValueError("query: give one or more words to look for.")
    searched = bases_for(user_id, chat_id, bases, within)
    base_ids = [base.pk for base in searched]
    if documents:
        found = set(Document.objects.filter(base_id__in=base_ids, pk__in=documents).values_list("pk", flat=True))
        if len(found) < len(set(documents)):
            raise LookupError("documents: no document with that id in the bases searched.")
    limit = max(1, min(limit, MAX_RESULTS))
    hits = hybrid.find(query[: lexical.MAX_QUERY], words, base_ids, documents or (), limit)
    ids = hits.ids
    chunks = {c.pk: c for c in Chunk.objects.filter(pk__in=ids).select_related("document", "base")}
    passages = [_passage(chunks[i]) for i in ids if i in chunks]
    return {
        "query": query[:500],
        "bases": [{"id": b.pk, "name": b.name} for b in searched],
        "retrieval": hits.mode,
        "note": hits.note,
        "passages": passages,
        "count": len(passages),
    }


def _passage(chunk: Chunk) -> dict[str, Any]:
    text = chunk.text if len(chunk.text) <= PASSAGE_CHARS else chunk.text[: PASSAGE_CHARS - 1] + "…"
    item: dict[str, Any] = {
        "handle": f"p{chunk.pk}",
        "document": f"d{chunk.document_id}",
        "title": chunk.document.title,
        "base": chunk.base.name,
        "heading": chunk.heading,
        "page": chunk.page,
        "text": text,
        "link": passage_link(chunk),
    }
    return {k: v for k, v in item.items() if v not in (None, "")}


def read(user_id: int | None, handle: str, page: int = 1) -> dict[str, Any]:
    """A passage with its neighbours' handles, or a document a page of passages at a time."""
    match = _HANDLE.match(handle or "")
    if match is None:
        raise ValueError("handle: give a passage handle like p123 or a document handle like d45, from search.")
    kind, number = match.group(1).lower(), int(match.group(2))
    documents = access.visible_documents(user_id)
    if kind == "p":
        chunk = Chunk.objects.filter(pk=number, document__in=documents).select_related("document", "base").first()
        if chunk is None:
            raise LookupError(f"There is no passage {handle.strip()} you can read.")
        item = _passage(chunk)
        item["text"] = chunk.text
        item["position"] = chunk.position + 1
        item["of"] = chunk.document.chunk_count
        siblings = Chunk.objects.filter(
            document_id=chunk.document_id, position__in=[chunk.position - 1, chunk.position + 1]
        )
        for sibling in siblings.only("id", "position"):
            item["previous" if sibling.position < chunk.position else "next"] = f"p{sibling.pk}"
        return item
    document = documents.filter(pk=number).select_related("base").first()
    if document is None:
        raise LookupError(f"There is no document {handle.strip()} you can read.")
    if document.status != Document.Status.READY:
        raise LookupError(f"“{document.title}” is not indexed yet ({document.get_status_display().lower()}).")
    return _document_page(document, max(1, page))


def _document_page(document: Document, page: int) -> dict[str, Any]:
    """Passages grouped into pages of about READ_PAGE_CHARS characters, in order."""
    pages: list[list[Chunk]] = [[]]
    size = 0
    for chunk in Chunk.objects.filter(document=document).order_by("position"):
        if pages[-1] and size + len(chunk.text) > READ_PAGE_CHARS:
            pages.append([])
            size = 0
        pages[-1].append(chunk)
        size += len(chunk.text)
    if page > len(pages):
        raise ValueError(f"page: “{document.title}” has {len(pages)} page(s) to read; ask for 1 to {len(pages)}.")
    parts = []
    heading = None
    for chunk in pages[page - 1]:
        if chunk.heading and chunk.heading != heading:
            parts.append(f"## {chunk.heading}")
            heading = chunk.heading
        parts.append(chunk.text)
    result: dict[str, Any] = {
        "handle": f"d{document.pk}",
        "title": document.title,
        "base": document.base.name,
        "page": page,
        "pages": len(pages),
        "text": "\n\n".join(parts),
        "link": document_link(document),
    }
    if page < len(pages):
        result["more"] = f"Page {page + 1} of {len(pages)} follows: read again with page={page + 1}."
    return result
