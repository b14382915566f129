"""Making and changing artifacts, for the tools (the agent) and the panel (the user) alike: every
change is checked against the same limits and becomes a new version; nothing is edited in place.
A refusal is `Refused` with a sentence the model or the user can act on."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import transaction

from .models import Artifact, ArtifactVersion
from .render import extension

KINDS = tuple(Artifact.Kind.values)
TITLE_CHARS = 200
# A code artifact's language: a word, as fences name them ("python", "c++", "objective-c").
LANGUAGE_CHARS = 40


class Refused(ValueError):
    """A change that is not made, and why (shown to the model as its tool's error, to the user in
    the panel)."""


@dataclass(frozen=True)
class Change:
    artifact: Artifact
    version: ArtifactVersion


def _clean_title(title: str) -> str:
    cleaned = " ".join(str(title).split())[:TITLE_CHARS]
    if not cleaned:
        raise Refused("An artifact needs a title.")
    return cleaned


def _check_content(content: str) -> str:
    if not isinstance(content, str) or not content.strip():
        raise Refused("The artifact's content is empty.")
    if "\x00" in content:
        raise Refused("The artifact's content holds a NUL character.")
    limit: int = settings.ARTIFACT_MAX_CHARS
    if len(content) > limit:
        raise Refused(f"The artifact is longer than {limit:,} characters.")
    return content


def create(
    *, owner_id: int, chat_id: int, title: str, kind: str, content: str, language: str = "", turn_id: int | None = None
) -> Change:
    if kind not in KINDS:
        raise Refused(f"Unknown kind {kind!r}: one of {', '.join(KINDS)}.")
    title = _clean_title(title)
    content = _check_content(content)
    language = "".join(str(language).split()).lower()[:LANGUAGE_CHARS] if kind == Artifact.Kind.CODE else ""
    with transaction.atomic():
        if Artifact.objects.filter(chat_id=chat_id).count() >= settings.ARTIFACTS_PER_CHAT:
            raise Refused(f"This chat already holds {settings.ARTIFACTS_PER_CHAT} artifacts: update one instead.")
        artifact = Artifact.objects.create(
            chat_id=chat_id, owner_id=owner_id, title=title, kind=kind, language=language
        )
        version = ArtifactVersion.objects.create(
            artifact=artifact, number=1, content=content, author=ArtifactVersion.Author.AGENT, turn_id=turn_id
        )
    return Change(artifact, version)


def latest(artifact: Artifact) -> ArtifactVersion:
    found = artifact.versions.order_by("-number").first()
    if found is None:  # every artifact is made with its first version
        raise Refused("This artifact has no version.")
    return found


def edited(current: str, old_text: str, new_text: str) -> str:
    """`current` with the one occurrence of `old_text` replaced: a targeted edit must name text
    that occurs exactly once, so it cannot change a place the model did not mean."""
    if not old_text:
        raise Refused("Give either the whole new content, or old_text (text to replace) and new_text.")
    count = current.count(old_text)
    if count == 0:
        raise Refused("old_text does not occur in the artifact's latest version: read it and try again.")
    if count > 1:
        raise Refused(f"old_text occurs {count} times in the artifact: give a longer, unique passage.")
    return current.replace(old_text, new_text, 1)


def revise(
    artifact: Artifact,
    *,
    content: str,
    author: str,
    turn_id: int | None = None,
    title: str = "",
    base: int | None = None,
) -> Change:
    """A new version of `artifact`. `base`: the version the change was made from (the panel's
    editor); when a newer one exists meanwhile, the change is refused rather than lost silently."""
    content = _check_content(content)
    with transaction.atomic():
        locked = Artifact.objects.select_for_update().get(pk=artifact.pk)
        current = latest(locked)
        if base is not None and base != current.number:
            raise Refused(f"Version {current.number} was made while you edited version {base}: open it and edit again.")
        if current.number >= settings.ARTIFACT_VERSIONS:
            raise Refused(f"This artifact has {current.number} versions, the most it may keep: make a new one.")
        if title:
            locked.title = _clean_title(title)
        if content == current.content and not title:
            return Change(locked, current)
        locked.save(update_fields=["title", "updated_at"])
        version = ArtifactVersion.objects.create(
            artifact=locked, number=current.number + 1, content=content, author=author, turn_id=turn_id
        )
    return Change(locked, version)


def summary(change: Change) -> dict[str, Any]:
    """What a tool returns (and its card shows) about a change."""
    return {
        "artifact_id": change.artifact.pk,
        "title": change.artifact.title,
        "kind": change.artifact.kind,
        "kind_label": change.artifact.get_kind_display(),
        "version": change.version.number,
        "chars": len(change.version.content),
    }


def for_export(chat_id: int, *, until: Any = None) -> list[dict[str, Any]]:
    """A chat's artifacts with all their versions, for its export (`until`: versions made by then)."""
    out: list[dict[str, Any]] = []
    for artifact in Artifact.objects.filter(chat_id=chat_id).order_by("id").prefetch_related("versions"):
        versions = [v for v in artifact.versions.all() if until is None or v.created_at <= until]
        if not versions:
            continue
        out.append(
            {
                "id": artifact.pk,
                "title": artifact.title,
                "kind": artifact.kind,
                "language": artifact.language,
                "extension": extension(artifact),
                "versions": [
                    {
                        "number": v.number,
                        "author": v.author,
                        "created_at": v.created_at.isoformat(),
                        "content": v.content,
                    }
                    for v in versions
                ],
            }
        )
    return out
