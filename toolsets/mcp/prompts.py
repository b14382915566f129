"""A server's prompts (its slash commands): listed, completed, fetched, and their messages turned
into parts a chat can take (the pickers' shared pieces are in `lists`).

Everything a server returns is untrusted: names and descriptions are cleaned and capped, and
a prompt's messages become a chat's messages only through the same rendering (escaped user
text, sanitized answers) as anything else typed or generated.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mcp_types import PromptReference, ResourceTemplateReference

from toolsets.base import ToolFailure

from . import resources

# `X as X`: the composer's views reach these shared pieces through here.
from .lists import MAX_ARGUMENT_LENGTH as MAX_ARGUMENT_LENGTH
from .lists import MAX_ARGUMENTS, MAX_SUGGESTIONS, _Empty, cached_list, request
from .lists import Source as Source
from .lists import source as source
from .lists import sources as sources
from .untrusted import clean_text

# --- Prompts -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Argument:
    name: str
    title: str
    description: str
    required: bool


@dataclass(frozen=True)
class Prompt:
    server: str  # the server's slug
    server_name: str
    name: str
    title: str
    description: str
    arguments: tuple[Argument, ...]

    @property
    def command(self) -> str:
        return f"/{self.name}"


def _prompt(found: Source, item: dict[str, Any]) -> Prompt | None:
    name = item.get("name")
    if not isinstance(name, str) or not name or len(name) > 128 or not name.isprintable():
        return None
    arguments = []
    for arg in (item.get("arguments") or [])[:MAX_ARGUMENTS]:
        arg_name = arg.get("name") if isinstance(arg, dict) else None
        if isinstance(arg_name, str) and arg_name and len(arg_name) <= 128 and arg_name.isprintable():
            arguments.append(
                Argument(
                    arg_name,
                    clean_text(arg.get("title"), 80) or arg_name,
                    clean_text(arg.get("description"), 300),
                    arg.get("required") is True,
                )
            )
    return Prompt(
        server=found.slug,
        server_name=found.server.name,
        name=name,
        title=clean_text(item.get("title"), 80) or name,
        description=clean_text(item.get("description"), 300),
        arguments=tuple(arguments),
    )


async def list_prompts(found: list[Source], user_id: int) -> tuple[list[Prompt], list[str]]:
    """The prompts of every server in `found`, and a note for each server that failed (one
    failing server does not hide the others')."""
    prompts: list[Prompt] = []
    problems: list[str] = []
    for item in found:
        try:
            listed = await cached_list(item, user_id, "prompts/list", "prompts")
        except ToolFailure as exc:
            problems.append(str(exc))
            continue
        prompts += [p for p in (_prompt(item, i) for i in listed) if p is not None]
    return prompts, problems


def find_prompt(prompts: list[Prompt], server: str, name: str) -> Prompt | None:
    return next((p for p in prompts if p.server == server and p.name == name), None)


def check_arguments(prompt: Prompt, given: dict[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """The arguments to send (only the prompt's own, non-empty) and an error per argument."""
    values: dict[str, str] = {}
    errors: dict[str, str] = {}
    for arg in prompt.arguments:
        value = given.get(arg.name, "")
        if len(value) > MAX_ARGUMENT_LENGTH:
            errors[arg.name] = f"At most {MAX_ARGUMENT_LENGTH:,} characters."
        elif "\x00" in value:
            errors[arg.name] = "This value contains characters that cannot be sent."
        elif value.strip():
            values[arg.name] = value
        elif arg.required:
            errors[arg.name] = f"{arg.title} is required."
    return values, errors


async def get_prompt(found: Source, user_id: int, name: str, arguments: dict[str, str]) -> dict[str, Any]:
    """`prompts/get`: the prompt's messages as the server returned them (dumped JSON)."""
    return await request(found, user_id, lambda client: client.get_prompt(name, arguments))


async def complete(
    found: Source, user_id: int, ref: dict[str, str], argument: str, value: str, context: dict[str, str]
) -> list[str]:
    """`completion/complete` for a prompt's or a resource template's argument: the server's
    suggestions (cleaned, bounded). A server without completions suggests nothing."""
    reference: Any = (
        PromptReference(type="ref/prompt", name=ref["name"])
        if ref["type"] == "ref/prompt"
        else ResourceTemplateReference(type="ref/resource", uri=ref["uri"])
    )

    async def send(client: Any) -> Any:
        if client.server_capabilities.completions is None:
            return _Empty()
        return await client.complete(reference, {"name": argument, "value": value}, context or None)

    result = await request(found, user_id, send)
    values = (result.get("completion") or {}).get("values") or []
    cleaned = [clean_text(v, 200) for v in values if isinstance(v, str)]
    return list(dict.fromkeys(v for v in cleaned if v))[:MAX_SUGGESTIONS]


# --- A prompt's messages in the conversation ---------------------------------------------------


@dataclass
class Part:
    """One run of same-role messages of a prompt: its text and the files it carries."""

    role: str
    text: list[str]
    files: list[Any]


MAX_PROMPT_MESSAGES = 50


def parts(found: Source, user_id: int, result: dict[str, Any]) -> list[Part]:
    """The prompt's messages as runs of one role, their images and embedded resources stored as
    the user's files (text, images, documents the Files app reads). Raises resources.Unusable."""
    runs: list[Part] = []
    for message in (result.get("messages") or [])[:MAX_PROMPT_MESSAGES]:
        if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
            continue
        role = message["role"]
        if not runs or runs[-1].role != role:
            runs.append(Part(role, [], []))
        run = runs[-1]
        content = message.get("content")
        for block in content if isinstance(content, list) else [content]:
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if kind == "text":
                run.text.append(clean_text(block.get("text"), 32_000))
            elif kind in ("image", "audio"):
                blob = {"blob": block.get("data"), "mimeType": block.get("mimeType")}
                name = f"{found.server.name} {kind}"
                try:
                    run.files += resources.store(user_id, found, f"{kind}:", name, [blob])
                except resources.Unusable as exc:
                    run.text.append(f"[{kind} not attached: {exc}]")
            elif kind == "resource" and isinstance(block.get("resource"), dict):
                uri = str(block["resource"].get("uri") or "resource:")
                run.files += resources.store(user_id, found, uri, uri, [block["resource"]])
            elif kind == "resource_link":
                run.text.append(f"{clean_text(block.get('name'), 120)}: {clean_text(block.get('uri'), 2000)}")
    return [r for r in runs if any(t.strip() for t in r.text) or r.files]
