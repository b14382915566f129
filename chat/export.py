"""A chat written out for download: the branch it shows, as the provider would see it (JSON),
or as a readable Markdown document with each tool call and its result."""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any

from django.utils import timezone
from django.utils.text import slugify

from artifacts import store as artifact_store

from .models import Chat
from .worker import turn_store

FORMAT_VERSION = 1
_BACKTICKS = re.compile(r"`+")


def filename(chat: Chat, extension: str) -> str:
    stem = slugify(chat.display_title)[:60].strip("-") or "chat"
    return f"{stem}-{chat.pk}.{extension}"


def transcript(chat: Chat) -> list[dict[str, Any]]:
    return turn_store.transcript(chat.pk)


def as_json(
    chat: Chat,
    messages: list[dict[str, Any]],
    now: datetime | None = None,
    artifacts: list[dict[str, Any]] | None = None,
) -> str:
    data = {
        "format": "tessera.chat",
        "version": FORMAT_VERSION,
        "id": chat.pk,
        "title": chat.display_title,
        "model": chat.model.model if chat.model else None,
        "created_at": chat.created_at.isoformat(),
        "exported_at": (now or timezone.now()).isoformat(),
        # OpenAI's chat format: what the model is sent for this chat's next answer.
        "messages": messages,
        # The chat's artifacts, every version (the assistant's and the user's own edits).
        "artifacts": artifact_store.for_export(chat.pk) if artifacts is None else artifacts,
    }
    return json.dumps(data, ensure_ascii=False, indent=2) + "\n"


def _fence(text: str, language: str = "") -> str:
    # A fence longer than any run of backticks inside, so no content can close it early.
    longest = max((len(m.group()) for m in _BACKTICKS.finditer(text)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{language}\n{text}\n{ticks}"


def _arguments(raw: Any) -> str:
    try:
        return json.dumps(json.loads(raw or "{}"), ensure_ascii=False, indent=2)
    except (TypeError, ValueError):
        return str(raw)


def as_markdown(
    chat: Chat,
    messages: list[dict[str, Any]],
    now: datetime | None = None,
    artifacts: list[dict[str, Any]] | None = None,
) -> str:
    when = timezone.localtime(now or timezone.now()).strftime("%Y-%m-%d %H:%M %Z")
    model = f" · model {chat.model.name}" if chat.model else ""
    out = [f"# {chat.display_title}", f"_Exported from Tessera on {when}{model}._"]
    names: dict[str, str] = {}
    for message in messages:
        role = message.get("role")
        content = message.get("content") or ""
        if role == "user":
            out += ["## You", str(content)]
        elif role == "assistant":
            calls = message.get("tool_calls") or []
            if content or not calls:
                out += ["## Assistant", str(content)]
            for call in calls:
                function = call.get("function") or {}
                name = str(function.get("name") or "tool")
                names[str(call.get("id") or "")] = name
                out += [f"### Tool call: `{name}`", _fence(_arguments(function.get("arguments")), "json")]
        elif role == "tool":
            name = names.get(str(message.get("tool_call_id") or ""), "tool")
            out += [f"### Result of `{name}`", _fence(str(content))]
    out += _artifacts_markdown(artifact_store.for_export(chat.pk) if artifacts is None else artifacts)
    return "\n\n".join(out) + "\n"


def _artifacts_markdown(artifacts: list[dict[str, Any]]) -> list[str]:
    """Each artifact's latest version (every version is in the JSON export)."""
    if not artifacts:
        return []
    out = ["## Artifacts"]
    for artifact in artifacts:
        latest = artifact["versions"][-1]
        who = "you" if latest["author"] == "user" else "the assistant"
        out += [
            f"### {artifact['title']}",
            f"_{artifact['kind']}, version {latest['number']} of {len(artifact['versions'])}, by {who}._",
            _fence(latest["content"].rstrip("\n"), artifact["language"] or artifact["extension"]),
        ]
    return out
