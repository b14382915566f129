"""The Artifacts toolset: the model makes a document the user keeps (an HTML page, an SVG, a
Markdown note, a Mermaid diagram, code, a CSV table), then revises it — a whole new text, or
one passage replaced — and reads it back, the user's own edits included. Each change is a
version; the card in the transcript opens it in the panel beside the chat (artifacts.views)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from channels.db import database_sync_to_async

from toolsets.base import ToolContext, ToolFailure, Toolset, tool

from . import store
from .models import Artifact, ArtifactVersion

Kind = Literal["html", "svg", "markdown", "mermaid", "code", "csv"]
INSTRUCTIONS = (
    "Use create_artifact for a document the user will keep, view or reuse (an HTML page, an SVG "
    "picture, a Markdown document, a Mermaid diagram, a program, a CSV table) rather than pasting a "
    "long one into the answer; it is shown beside the chat. To change one, call update_artifact "
    "with its id: either the whole new content, or old_text (a passage occurring once) and "
    "new_text. The user may edit artifacts too: read_artifact gives the latest version. HTML runs "
    "in a sandbox without network: inline its CSS and scripts."
)


def _where(ctx: ToolContext) -> tuple[int, int]:
    if ctx.chat_id is None or ctx.user_id is None:
        raise ToolFailure(
            "Artifacts belong to a chat: call this tool from a conversation.", error_type="permission_denied"
        )
    return ctx.user_id, ctx.chat_id


def _own(user_id: int, chat_id: int, artifact_id: int) -> Artifact:
    found = Artifact.objects.filter(pk=artifact_id, chat_id=chat_id, owner_id=user_id).first()
    if found is None:
        raise store.Refused(f"This chat has no artifact {artifact_id}.")
    return found


def _summary(result: Any) -> str:
    if not isinstance(result, dict):
        return ""
    return f"{result.get('title', '')} · {result.get('kind_label', '')} · version {result.get('version', '')}"


def _model_text(result: Any) -> str:
    if not isinstance(result, dict):
        return str(result)
    if "content" in result:
        return (
            f"Artifact {result['artifact_id']} “{result['title']}” ({result['kind']}), version {result['version']} "
            f"by {result['author']}:\n{result['content']}"
        )
    return (
        f"Artifact {result['artifact_id']} “{result['title']}” ({result['kind']}) is at version {result['version']} "
        "and shown to the user beside the chat."
    )


async def _run(func: Any, *args: Any, **kwargs: Any) -> Any:
    try:
        return await database_sync_to_async(func, thread_sensitive=False)(*args, **kwargs)
    except store.Refused as exc:
        raise ToolFailure(str(exc), error_type="invalid_request_error") from exc


@tool(
    display_name="Create artifact",
    side_effects=True,
    policy="auto",
    summarize=_summary,
    status_text=lambda args: f"Writing {str(args.get('title') or 'the artifact')[:80]}…",
)
async def create_artifact(
    ctx: ToolContext,
    title: Annotated[str, "A short title"],
    kind: Annotated[Kind, "What the content is"],
    content: Annotated[str, "The whole document: HTML, SVG, Markdown, Mermaid source, code or CSV"],
    language: Annotated[str, "For code: its language, e.g. python"] = "",
) -> dict[str, Any]:
    """Create an artifact (a document shown beside the chat, with versions) in this chat."""
    user_id, chat_id = _where(ctx)

    def make() -> dict[str, Any]:
        return store.summary(
            store.create(
                owner_id=user_id,
                chat_id=chat_id,
                title=title,
                kind=kind,
                content=content,
                language=language,
                turn_id=ctx.turn_id,
            )
        )

    result: dict[str, Any] = await _run(make)
    return result


@tool(
    display_name="Update artifact",
    side_effects=True,
    policy="auto",
    summarize=_summary,
    status_text=lambda args: "Revising the artifact…",
)
async def update_artifact(
    ctx: ToolContext,
    artifact_id: Annotated[int, "The artifact's id"],
    content: Annotated[str, "The whole new content (or leave empty and give old_text and new_text)"] = "",
    old_text: Annotated[str, "A passage occurring exactly once in the latest version, to replace"] = "",
    new_text: Annotated[str, "What replaces old_text"] = "",
    title: Annotated[str, "A new title, if it changes"] = "",
) -> dict[str, Any]:
    """Make a new version of an artifact: its whole new content, or one passage replaced."""
    user_id, chat_id = _where(ctx)

    def change() -> dict[str, Any]:
        artifact = _own(user_id, chat_id, artifact_id)
        text = content or store.edited(store.latest(artifact).content, old_text, new_text)
        return store.summary(
            store.revise(artifact, content=text, author=ArtifactVersion.Author.AGENT, turn_id=ctx.turn_id, title=title)
        )

    result: dict[str, Any] = await _run(change)
    return result


@tool(display_name="Read artifact", summarize=_summary, status_text=lambda args: "Reading the artifact…")
async def read_artifact(
    ctx: ToolContext,
    artifact_id: Annotated[int, "The artifact's id"],
) -> dict[str, Any]:
    """Read the latest version of an artifact of this chat, the user's own edits included."""
    user_id, chat_id = _where(ctx)

    def read() -> dict[str, Any]:
        artifact = _own(user_id, chat_id, artifact_id)
        version = store.latest(artifact)
        return {
            **store.summary(store.Change(artifact, version)),
            "author": version.get_author_display().lower() if version.author == "agent" else "the user",
            "content": version.content,
        }

    result: dict[str, Any] = await _run(read)
    return result


for _tool in (create_artifact, update_artifact, read_artifact):
    _tool.model_text = _model_text
    _tool.card_template = "artifacts/_card.html"
    _tool.card_open = True

toolset = Toolset(
    id="artifacts",
    name="Artifacts",
    description=(
        "Documents the assistant writes and revises beside the chat: HTML, SVG, Markdown, diagrams, code, tables."
    ),
    tools=[create_artifact, update_artifact, read_artifact],
    instructions=INSTRUCTIONS,
)
