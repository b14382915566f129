"""What a toolset and a tool are.

A tool is a typed Python function with a one-line docstring. Its JSON schema is derived from the
signature (parameters annotated with `Annotated[type, "description"]`), so it is never written
twice. The first parameter may be a `ToolContext`, which the schema leaves out.
"""

from __future__ import annotations

import inspect
import re
import types
import typing
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, Union, get_args, get_origin
from urllib.parse import urlsplit

TOOL_PREFIX = "toolset"
# Tool policies, least strict first (see toolsets.policy).
POLICIES = ("auto", "ask", "deny")
SEPARATOR = "__"


@dataclass
class ToolContext:
    """Handed to a tool that asks for it: who calls, with which key and settings."""

    user_id: int | None = None
    # The turn the call belongs to (None from the HTTP API): tools that work on "this chat" read
    # the chat from it, always together with user_id.
    turn_id: int | None = None
    # The chat of that turn, given by the chat side (None from the HTTP API): "this chat's" files
    # and the like, always together with user_id.
    chat_id: int | None = None
    api_key: str = ""
    settings: dict[str, Any] = field(default_factory=dict)
    # What the running agent limits its tools to, by key ({"knowledge_bases": [ids]}: an admin's
    # agent searches only its own bases). Empty: the chat's or the caller's usual reach.
    scope: dict[str, Any] = field(default_factory=dict)
    # Called by long-running tools to show live progress on their card.
    progress: Callable[[str, float | None], None] = field(default=lambda text, percent=None: None)
    # Called by tools whose result grows while they run (code's output) with the result so far:
    # its card shows it live (through the tool's `card_template`). Callers throttle it.
    partial: Callable[[Any], None] = field(default=lambda result: None)
    # Asks the person behind the call a tool's question (an MCP server's elicitation) and
    # returns their answer: the chat's card (chat.worker.asking). None: nobody to ask (the API).
    elicit: Callable[[Any], Awaitable[Any]] | None = None
    # The running call's timeout (an `asyncio.Timeout`, set by the executor), which a tool
    # waiting on the person pauses: their thinking is not the tool's time.
    clock: Any = None


class ToolFailure(Exception):
    """Raised by a tool to fail with a specific error type, e.g. an upstream 429 becomes
    `rate_limit_error` with retryable=True. Any other exception is an `execution_error`.
    `fault`: whether the failure is the tool's own (counted by its circuit breaker); by
    default a timeout or a retryable execution error (a 5xx, a lost connection) is."""

    def __init__(
        self, message: str, *, error_type: str = "execution_error", retryable: bool = False, fault: bool | None = None
    ) -> None:
        super().__init__(message)
        self.error_type = error_type
        self.retryable = retryable
        self.fault = fault


Summarizer = Callable[[Any], str]
StatusText = Callable[[dict[str, Any]], str]


@dataclass
class Tool:
    func: Callable[..., Any]
    name: str
    display_name: str
    description: str
    parameters: dict[str, Any]
    timeout_s: float = 20.0
    side_effects: bool = False
    rate_limit_key: str = ""
    summarize: Summarizer | None = None
    status_text: StatusText | None = None
    wants_context: bool = False
    toolset_id: str = ""
    # Awaited before the timed call, with its own limits (an MCP server's connection, say), so
    # the tool's timeout measures the call itself.
    prepare: Callable[[ToolContext], Awaitable[None]] | None = None
    # What a result was drawn from, for citations: result → [toolsets.sources.source(...)].
    sources: Callable[[Any], list[dict[str, str]]] | None = None
    # What the model reads of a result, when the JSON of it is not it (e.g. a result carrying
    # images: the model gets their description, the card shows them).
    model_text: Callable[[Any], str] | None = None
    # Tool policy (see toolsets.policy): "auto" runs, "ask" waits for the user's approval of
    # each call, "deny" is never offered. Empty: "ask" for tools with side effects, else "auto".
    policy: str = ""
    # How long an identical call may reuse a result (0: never); only for tools without side
    # effects. Public results may be shared between users (never between credentials).
    cache_ttl_s: int = 0
    cache_public: bool = False
    # False for a tool that must be asked about on every call (an MCP tool its server calls
    # destructive): the approval card offers no "Always allow this tool in this chat".
    always_allowable: bool = True
    # Short notes its cards show next to its name (an MCP tool its server says reaches the open
    # world: "Reaches outside services").
    hints: tuple[str, ...] = ()
    # A template showing the call on its card (its `card.raw` arguments and result) instead of
    # the arguments and result as JSON; it is given a running call's partial result too.
    card_template: str = ""
    # Its finished cards stay unfolded: what they show is the point of the call (an artifact).
    card_open: bool = False
    # Why the tool may not run now, whatever its policy (an MCP tool whose definition changed
    # on the server until an admin reviews it): it is not offered, and a call fails with this.
    held: str = ""
    # False for a tool only an MCP App's View may call (`_meta.ui.visibility: ["app"]`): it is
    # never offered to a model or listed for selection.
    model_visible: bool = True
    # MCP Apps (toolsets.mcp.app_resources), for a tool of a server whose apps are on:
    # {"sha256", "uri"} of the page its results are shown in ("" for none), and "callable":
    # whether a View of the same server may call it. None: not an app's tool.
    app: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.policy not in ("", *POLICIES):
            raise ValueError(f"{self.name}: policy must be one of {', '.join(POLICIES)}, not {self.policy!r}")
        if self.cache_ttl_s and self.side_effects:
            raise ValueError(f"{self.name}: a tool with side effects cannot declare a cache time")
        if self.cache_ttl_s < 0:
            raise ValueError(f"{self.name}: cache_ttl_s cannot be negative")

    @property
    def declared_policy(self) -> str:
        return self.policy or ("ask" if self.side_effects else "auto")

    @property
    def is_async(self) -> bool:
        return inspect.iscoroutinefunction(self.func)


@dataclass
class Toolset:
    id: str
    name: str
    description: str
    tools: list[Tool]
    needs_api_key: bool = False
    # Settings an admin may set in Django admin, with their defaults (e.g. a base URL).
    default_settings: dict[str, Any] = field(default_factory=dict)
    # For toolsets a user must set up before use (e.g. create their workspace): returns True
    # while the user still has to; the settings page then shows `setup_label` as an action.
    needs_setup: Callable[[int], bool] | None = None
    setup_label: str = ""
    # Performs the setup for a user (the settings page's button).
    setup: Callable[[int], None] | None = None
    # Default state for a user who has not touched the toolset in their settings.
    enabled_by_default: bool = True
    # Shown before a tool's name on its card ("Exa: Search"); defaults to `name`.
    short_name: str = ""
    # Toolsets configured in the database (MCP servers) carry their own admin switch, and the
    # groups the admin limited them to (empty: everyone).
    enabled: bool = True
    group_ids: frozenset[int] = frozenset()
    # Off until an admin saves its configuration switched on (Code: people's code on Tessera's
    # machines); other toolsets are on until an admin switches them off.
    off_until_enabled: bool = False
    # The user must give their own credential: the app-level key is never used for it.
    user_key_only: bool = False
    # A live condition beyond the settings (e.g. "Server unreachable"): () → (reason, detail),
    # ("", "") while usable. Must not touch the database (availability calls it per user).
    status_check: Callable[[], tuple[str, str]] | None = None
    # A partial the settings page includes in the toolset's card, with `state` in its context.
    card_template: str = ""
    # The tools reach one server (an MCP server): besides each tool's own circuit breaker, the
    # failures of all of them count against one breaker for the whole toolset.
    shared_breaker: bool = False
    # What the toolset's provider asks the model to know when its tools are offered (an MCP
    # server's `instructions`, already cleaned and capped): added to the system prompt.
    instructions: str = ""
    # Whether its tools are worth offering to this user's model at all (a database read: user
    # id → bool), asked only where tools are offered (a turn, /mcp's list), never by the
    # settings pages: Knowledge with no base the user can see, Memory the user turned off.
    offered_to: Callable[[int], bool] | None = None

    @property
    def label(self) -> str:
        return self.short_name or self.name

    def __post_init__(self) -> None:
        for tool in self.tools:
            tool.toolset_id = self.id
            if not tool.rate_limit_key:
                tool.rate_limit_key = f"{self.id}.{tool.name}"

    def get(self, name: str) -> Tool | None:
        return next((tool for tool in self.tools if tool.name == name), None)


def qualified_name(toolset_id: str, tool_name: str) -> str:
    return f"{TOOL_PREFIX}{SEPARATOR}{toolset_id}{SEPARATOR}{tool_name}"


def split_qualified_name(name: str) -> tuple[str, str] | None:
    parts = name.split(SEPARATOR)
    if len(parts) != 3 or parts[0] != TOOL_PREFIX or not parts[1] or not parts[2]:
        return None
    return parts[1], parts[2]


def humanize(name: str) -> str:
    """`SOME_TOOL_NAME` / `snake_case` / `camelCase` → "Some tool name"."""
    words = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", name).replace("_", " ").replace("-", " ").split()
    text = " ".join(words).lower()
    return text[:1].upper() + text[1:]


def plural(count: int, word: str) -> str:
    """ "1 result", "3 results": for summaries and status texts."""
    return f"{count} {word}{'' if count == 1 else 's'}"


def url_host(url: object) -> str:
    """The host of a URL for a one-line text, or the (shortened) URL when it has none."""
    text = str(url)
    try:
        return urlsplit(text).hostname or text[:60]
    except ValueError:
        return text[:60]


def tool(
    *,
    display_name: str = "",
    timeout_s: float = 20.0,
    side_effects: bool = False,
    rate_limit_key: str = "",
    summarize: Summarizer | None = None,
    status_text: StatusText | None = None,
    sources: Callable[[Any], list[dict[str, str]]] | None = None,
    policy: str = "",
    cache_ttl_s: int = 0,
    cache_public: bool = False,
) -> Callable[[Callable[..., Any]], Tool]:
    """Turns a typed function into a Tool."""

    def wrap(func: Callable[..., Any]) -> Tool:
        doc = inspect.getdoc(func) or ""
        description = doc.strip().splitlines()[0] if doc.strip() else humanize(func.__name__)
        schema, wants_context = schema_for(func)
        return Tool(
            func=func,
            name=func.__name__,
            display_name=display_name or humanize(func.__name__),
            description=description,
            parameters=schema,
            timeout_s=timeout_s,
            side_effects=side_effects,
            rate_limit_key=rate_limit_key,
            summarize=summarize,
            status_text=status_text,
            wants_context=wants_context,
            sources=sources,
            policy=policy,
            cache_ttl_s=cache_ttl_s,
            cache_public=cache_public,
        )

    return wrap


def schema_for(func: Callable[..., Any]) -> tuple[dict[str, Any], bool]:
    hints = typing.get_type_hints(func, include_extras=True)
    properties: dict[str, Any] = {}
    required: list[str] = []
    wants_context = False
    for name, param in inspect.signature(func).parameters.items():
        hint = hints.get(name, str)
        if hint is ToolContext:
            wants_context = True
            continue
        prop = _schema_for_type(hint)
        if param.default is inspect.Parameter.empty:
            required.append(name)
        elif param.default is not None:
            prop["default"] = param.default
        properties[name] = prop
    schema: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        schema["required"] = required
    return schema, wants_context


_SIMPLE = {str: "string", int: "integer", float: "number", bool: "boolean"}


def _schema_for_type(hint: Any) -> dict[str, Any]:
    description = ""
    if get_origin(hint) is Annotated:
        hint, *extras = get_args(hint)
        description = next((e for e in extras if isinstance(e, str)), "")
    schema = _bare_schema(hint)
    if description:
        schema["description"] = description
    return schema


def _bare_schema(hint: Any) -> dict[str, Any]:
    origin = get_origin(hint)
    if hint in _SIMPLE:
        return {"type": _SIMPLE[hint]}
    if origin is Literal:
        values = list(get_args(hint))
        return {"type": _SIMPLE.get(type(values[0]), "string"), "enum": values}
    if origin in (Union, types.UnionType):
        options = [arg for arg in get_args(hint) if arg is not type(None)]
        if len(options) == 1:
            return _bare_schema(options[0])
        return {"anyOf": [_bare_schema(option) for option in options]}
    if origin in (list, tuple, set):
        args = get_args(hint)
        return {"type": "array", "items": _bare_schema(args[0]) if args else {}}
    if origin is dict or hint is dict:
        return {"type": "object"}
    if get_origin(hint) is Annotated:
        return _schema_for_type(hint)
    raise TypeError(f"Unsupported tool parameter type: {hint!r}")
