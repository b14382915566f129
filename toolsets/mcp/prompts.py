"""A server's prompts (its slash commands) and the pieces the composer's prompt and resource
pickers share: which servers a chat may use, lists cached by the server's hints, and requests
made on a connection of their own (a web request has no lasting event loop to pool one in).

Everything a server returns is untrusted: names and descriptions are cleaned and capped, and
a prompt's messages become a chat's messages only through the same rendering (escaped user
text, sanitized answers) as anything else typed or generated.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from django.core.cache import cache
from mcp_types import PromptReference, ResourceTemplateReference

from toolsets import availability
from toolsets.base import ToolFailure

from .catalog import ServerSpec, clean_text
from .client import access_for
from .connection import Connection
from .errors import describe
from .models import MCPServer

MAX_ITEMS = 200
MAX_PAGES = 10
MAX_ARGUMENTS = 20
MAX_ARGUMENT_LENGTH = 4000
MAX_SUGGESTIONS = 20
# A list result without a `ttlMs` hint (every handshake-era server) is kept this long: the
# menu opens on every "/" typed, and a server's prompts rarely change within a minute.
DEFAULT_TTL_S = 60.0
MAX_TTL_S = 3600.0


@dataclass(frozen=True)
class Source:
    """A server the user may use in this chat: enabled, selected by the chat, available to them."""

    server: MCPServer
    spec: ServerSpec
    api_key: str

    @property
    def slug(self) -> str:
        return self.server.slug


def sources(user_id: int, selection: Any) -> list[Source]:
    """The MCP servers a chat's selection (`Chat.enabled_tools`) names that the user may use."""
    chosen = [key for key, value in (selection or {}).items() if key.startswith("mcp_") and value]
    if not chosen:
        return []
    found = []
    for server in MCPServer.objects.filter(enabled=True).order_by("name"):
        if server.toolset_id not in chosen:
            continue
        state = availability.for_toolset(user_id, server.toolset_id)
        if state is not None and state.usable:
            found.append(Source(server, ServerSpec.of(server), state.api_key))
    return found


def source(user_id: int, selection: Any, slug: str) -> Source | None:
    return next((s for s in sources(user_id, selection) if s.slug == slug), None)


async def request(found: Source, user_id: int, send: Callable[[Any], Awaitable[Any]]) -> dict[str, Any]:
    """One request to the server with the user's own access, on a connection of its own, with
    the connection's retry of a lost session and its readable failures (ToolFailure). The
    result comes back dumped to JSON (camelCase keys, as on the wire)."""
    connection = Connection(found.spec, access_for(found.spec, user_id, found.api_key))
    try:
        return await connection._request(send, found.spec.timeout_s)
    except ToolFailure:
        raise
    except Exception as exc:  # a malformed answer, a broken stream: the user's request fails
        raise ToolFailure(f"{found.spec.name}: the request failed ({describe(exc)}).") from None
    finally:
        await connection.close()


async def cached_list(found: Source, user_id: int, method: str, key: str) -> list[dict[str, Any]]:
    """Every page of a list method (`prompts/list`, `resources/list`, `resources/templates/list`),
    as dumped JSON items under `key`, kept for as long as the server's `ttlMs` hint says (for the
    user alone unless its `cacheScope` says the list is the same for everyone)."""
    access = access_for(found.spec, user_id, found.api_key)
    scope = hashlib.sha256(access.key.encode()).hexdigest()[:16]
    base = f"mcp:list:{found.spec.id}:{found.spec.version}:{method}"
    for cache_key in (f"{base}:shared", f"{base}:{scope}"):
        hit = cache.get(cache_key)
        if hit is not None:
            return hit  # type: ignore[no-any-return]
    items: list[dict[str, Any]] = []
    ttl: float | None = None
    shared = False
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        page = await request(found, user_id, _lister(method, cursor))
        items += [i for i in page.get(key) or [] if isinstance(i, dict)]
        hint = page.get("ttlMs")
        if isinstance(hint, int | float) and not isinstance(hint, bool):
            ttl = hint / 1000 if ttl is None else min(ttl, hint / 1000)
        shared = page.get("cacheScope") == "shared"
        cursor = page.get("nextCursor")
        if not cursor or len(items) >= MAX_ITEMS:
            break
    items = items[:MAX_ITEMS]
    timeout = DEFAULT_TTL_S if ttl is None else min(ttl, MAX_TTL_S)
    if timeout > 0:
        cache.set(f"{base}:shared" if shared else f"{base}:{scope}", items, timeout)
    return items


def _lister(method: str, cursor: str | None) -> Callable[[Any], Awaitable[Any]]:
    async def send(client: Any) -> Any:
        # A server without the capability would answer "method not found": it lists nothing.
        capabilities = client.server_capabilities
        offered = capabilities.prompts if method == "prompts/list" else capabilities.resources
        if offered is None:
            return _Empty()
        call = {
            "prompts/list": client.list_prompts,
            "resources/list": client.list_resources,
            "resources/templates/list": client.list_resource_templates,
        }[method]
        # The connection is this request's alone: the SDK's cache would die with it.
        return await call(cursor=cursor, cache_mode="bypass")

    return send


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


class _Empty:
    """The result of a request a server cannot answer (no such capability): nothing."""

    def model_dump(self, **_: Any) -> dict[str, Any]:
        return {}


# --- A prompt's messages in the conversation ---------------------------------------------------


@dataclass
class Part:
    """One run of same-role messages of a prompt: its text and the files it carries."""

    role: str
    text: list[str]
    files: list[Any]


@dataclass
class Inserted:
    turns: list[Any]  # chat.models.Turn, completed exchanges made of the prompt's messages
    draft: str  # the prompt's last user text, for the composer (the user edits, then sends)
    files: list[Any]  # that text's files, not yet on a message (the composer's chips)


MAX_PROMPT_MESSAGES = 50


def parts(found: Source, user_id: int, result: dict[str, Any]) -> list[Part]:
    """The prompt's messages as runs of one role, their images and embedded resources stored as
    the user's files (text, images, documents the Files app reads). Raises resources.Unusable."""
    from . import resources

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


def insert(chat: Any, runs: list[Part], origin: dict[str, str] | None = None) -> Inserted:
    """Each user run answered by an assistant run becomes a completed exchange of the chat (no
    model call: the server wrote both sides; `origin`, the server and prompt, is kept on the
    question); a last, unanswered user run goes to the composer. Call inside a transaction with
    the chat locked idle (`chat.exchanges.lock_idle`)."""
    from chat.models import Message, Turn
    from toolsets.files import attach

    turns: list[Any] = []
    pending: Part | None = None
    for run in runs:
        if run.role == "user":
            if pending is not None:  # two user runs cannot happen (runs alternate); defensive
                pending.text += run.text
                pending.files += run.files
            else:
                pending = run
            continue
        question = pending or Part("user", [], [])
        pending = None
        model, _ = chat.next_model()
        turn = Turn.objects.create(chat=chat, model=model, status=Turn.Status.COMPLETED)
        asked = Message.objects.create(
            chat=chat,
            turn=turn,
            role=Message.Role.USER,
            content="\n\n".join(question.text).strip() or "…",
            metadata={"mcp_prompt": origin or {}},
        )
        attach.link(question.files, asked)
        answer = "\n\n".join(run.text).strip()
        if run.files:
            names = ", ".join(f.name for f in run.files)
            answer += f"\n\n(The prompt's answer carried files, attached to the question above: {names}.)"
            attach.link(run.files, asked)
        Message.objects.create(
            chat=chat, turn=turn, role=Message.Role.ASSISTANT, content=answer, step=0, finish_reason="stop"
        )
        turns.append(turn)
    if turns and not chat.title:
        from chat.exchanges import title_from

        chat.title = title_from(Message.objects.filter(turn=turns[0], role="user").values_list("content", flat=True)[0])
        chat.save(update_fields=["title", "updated_at"])
    if pending is None:
        return Inserted(turns, "", [])
    return Inserted(turns, "\n\n".join(pending.text).strip(), pending.files)
