"""Tessera as an MCP server, at `/mcp`: its toolsets and agents for any MCP client (Claude
Desktop, IDEs, agent frameworks), under the same rules as the chat.

- Streamable HTTP, stateless for the 2026-07-28 revision (which any number of web processes
  serve alike); the `mcp` SDK answers handshake-era clients on the same endpoint, each with a
  session owned by its caller (the only way that era lets a server ask during a call).
- Auth: an API token (`Authorization: Bearer tsk_…`) or an OAuth access token this server issued
  for this endpoint (chat/api/oauth.py: the MCP authorization flow, which a 401's
  `WWW-Authenticate` points clients to), counted by the sign-in throttle like any token. Off
  until an admin switches it on (*App settings → MCP server*).
- `tools/list`: the tools usable *for this user*, from the same availability and policies as the
  chat (a toolset the user cannot use, and any tool whose policy is Deny, is not listed), with
  titles, schemas and annotations that tell the truth (a tool without side effects says it is
  read-only). Agents are listed as `delegate_to_<agent>`.
- `tools/call`: through the one executor (validation, rate limits, breaker, cache, audit: the
  `ToolExecution` names the client, "mcp: <its name>"), with progress notifications, text and
  structured content, MCP servers' own content passed through, and sources as links a client can
  open (or as text). A client's cancellation stops the tool (audited as cancelled) or the agent's
  turn. An agent runs in a Celery worker, as in the chat (chat/api/openai.py starts its turn),
  and its progress streams as notifications.
- Ask tools (mcp_ask.py): the client's own confirmation form (form-mode elicitation: `elicitation/create`
  during the call in the handshake era, an `InputRequiredResult` and a retry in the 2026-07-28
  revision), else Tessera's approval page (URL-mode elicitation, chat/approval_views.py), else
  an error naming the ways that work. A token created with *may approve* runs them directly.
- Refusals are JSON-RPC errors with a 4xx status, the SDK's own plain-text ones included.
- Origin checked against the page's own origin and CSRF_TRUSTED_ORIGINS, and Host against
  ALLOWED_HOSTS (DNS-rebinding protection, as the specification requires).
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
import logging
from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import anyio
import mcp_types as types
from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.handlers.asgi import ASGIRequest
from django.http.request import split_domain_port, validate_host
from django.urls import reverse
from django.utils import timezone
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.lowlevel import Server
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from core import origins
from core.asgi import error_body
from toolsets import availability, executor, policy
from toolsets.auth import token_from
from toolsets.base import qualified_name
from toolsets.mcp import results as mcp_results
from toolsets.models import ApiToken
from toolsets.registry import all_toolsets
from toolsets.sources import SourceBook

from ..agents import registry as agent_registry
from ..agents.base import tool_name as agent_tool_name
from ..models import AppSettings
from . import mcp_ask, oauth

log = logging.getLogger(__name__)

SCOPE_KEY = "tessera.mcp"
ASK_NOTE = (
    " (Asks for approval: the client's own confirmation form, or Tessera's approval page in the browser;"
    " a token that may approve runs it directly.)"
)
INSTRUCTIONS = (
    "Tessera's tools and agents, with the signed-in user's keys, policies and limits. Tools named "
    "delegate_to_<agent> hand a task to one of Tessera's agents, which works with its own tools."
)


def _caller(ctx: Any) -> dict[str, Any]:
    request = ctx.request
    scope = getattr(request, "scope", None) or {}
    found = scope.get(SCOPE_KEY)
    if not found:
        raise PermissionError("Not authenticated.")  # the endpoint never lets such a request through
    return dict(found)


def _client_name(ctx: Any, caller: dict[str, Any]) -> str:
    """The client's own name (every 2026-07-28 request carries it; a handshake-era client
    sends it once, which a stateless server does not see again), else the token's."""
    params = getattr(ctx.session, "client_params", None)
    info = getattr(params, "client_info", None)
    name = getattr(info, "name", "") if info is not None else ""
    if caller.get("oauth_client"):
        # The name the user saw on the consent page, not one the client may change per request.
        return f"mcp: {caller['oauth_client']}"[:200]
    return f"mcp: {name or caller['token_name']}"[:200]


def listed_tools(user_id: int, *, tools_scope: bool = True, agents_scope: bool = True) -> list[types.Tool]:
    """What this user may call with this token, as MCP tools (blocking)."""
    return [tool for tool, _ in _offers(user_id, tools_scope=tools_scope, agents_scope=agents_scope)]


def _offers(user_id: int, *, tools_scope: bool, agents_scope: bool) -> list[tuple[types.Tool, str]]:
    """Each tool offered, with its resolved policy (agents: "")."""
    available = availability.for_user(user_id)
    app = AppSettings.load()
    admin_policies = {toolset_id: state.admin_policy for toolset_id, state in available.items()}
    policies = policy.PolicyBook(user_id, admin_policies)
    tools: list[tuple[types.Tool, str]] = []
    for toolset in all_toolsets().values() if tools_scope else ():
        state = available.get(toolset.id)
        if state is None or not state.usable or not app.exposes("mcp_server", "toolsets", toolset.id):
            continue
        for tool in toolset.tools:
            resolved = policies.get(toolset, tool).policy
            if resolved == policy.DENY:
                continue
            listed = types.Tool(
                name=qualified_name(toolset.id, tool.name),
                title=f"{toolset.name}: {tool.display_name}",
                description=tool.description + (ASK_NOTE if resolved == policy.ASK else ""),
                input_schema=tool.parameters or {"type": "object", "properties": {}},
                annotations=types.ToolAnnotations(
                    title=tool.display_name,
                    read_only_hint=not tool.side_effects,
                    destructive_hint=tool.side_effects,
                    open_world_hint=toolset.id.startswith("mcp_") or toolset.id in ("web", "exa"),
                ),
            )
            tools.append((listed, resolved))
    for agent_id, agent_state in agent_registry.availability(user_id, toolsets=available).items():
        if not agent_state.usable or not agents_scope or not app.exposes("mcp_server", "agents", agent_id):
            continue
        agent = agent_state.agent
        listed = types.Tool(
            name=agent_tool_name(agent_id),
            title=f"Agent: {agent.name}",
            description=agent.description,
            input_schema={
                "type": "object",
                "properties": {
                    "task": {"type": "string", "description": "What the agent should do."},
                    "context": {"type": "string", "description": "Anything it needs to know."},
                },
                "required": ["task"],
            },
            annotations=types.ToolAnnotations(title=agent.name, read_only_hint=False, open_world_hint=True),
        )
        tools.append((listed, ""))
    return tools


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    caller = _caller(ctx)
    found = await sync_to_async(listed_tools)(
        caller["user_id"], tools_scope=caller["tools"], agents_scope=caller["agents"]
    )
    return types.ListToolsResult(tools=found)


def _progress_token(ctx: Any) -> str | int | None:
    meta = ctx.meta or {}
    token = meta.get("progress_token", meta.get("progressToken")) if isinstance(meta, dict) else None
    return token if isinstance(token, (str, int)) and not isinstance(token, bool) else None


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult | types.InputRequiredResult:
    caller = _caller(ctx)
    arguments = dict(params.arguments or {})
    token = _progress_token(ctx)
    loop = asyncio.get_running_loop()
    sent = 0

    async def notify(text: str, percent: float | None) -> None:
        nonlocal sent
        if token is None:
            return
        sent += 1
        try:
            # On this request's own stream (stateless: there is no other).
            await ctx.session.send_progress_notification(
                token,
                percent if percent is not None else float(sent),
                100.0 if percent is not None else None,
                text,
                related_request_id=str(ctx.request_id) if ctx.request_id is not None else None,
            )
        except Exception:  # a client that went away does not fail the call
            log.debug("A progress notification could not be sent", exc_info=True)

    def progress(text: str, percent: float | None = None) -> None:
        # Tools report from worker threads too: back onto this loop.
        loop.call_soon_threadsafe(lambda: asyncio.ensure_future(notify(text, percent)))

    # What this token may call here (the list a client got): anything else is refused and
    # audited by the executor, as a model's call to a tool it was not offered is in the chat.
    offers = await sync_to_async(_offers)(caller["user_id"], tools_scope=caller["tools"], agents_scope=caller["agents"])
    offered = {tool.name: resolved for tool, resolved in offers}
    agent = agent_registry.agent_for_tool(params.name, await sync_to_async(agent_registry.agents)())
    if agent is not None and params.name not in offered:
        return types.CallToolResult(
            content=[types.TextContent(text=f"permission_denied: {agent.name} is not offered here.")], is_error=True
        )
    if not caller["agents" if agent is not None else "tools"]:
        kind = "agents" if agent is not None else "tools"
        return types.CallToolResult(
            content=[types.TextContent(text=f"permission_denied: this token may not run {kind}.")], is_error=True
        )
    client = _client_name(ctx, caller)
    if agent is not None:
        return await _delegate(caller, agent, arguments, notify, client)
    approve: Any = None
    if offered.get(params.name) == policy.ASK and not caller["can_approve"]:
        asking = await mcp_ask.ask(ctx, params, caller, arguments, client)
        if isinstance(asking, (types.InputRequiredResult, types.CallToolResult)):
            return asking  # asking the client first, or a replayed answer refused
        approve = asking
    book = SourceBook()
    execution = await executor.execute(
        params.name,
        arguments,
        user_id=caller["user_id"],
        tool_call_id=f"mcp_{ctx.request_id}"[:200],
        pre_approved=caller["can_approve"],
        approve=approve,
        progress=progress,
        sources=book,
        offered=offered.keys(),
        offered_in="offered by this server",
        client=client,
    )
    if execution.error is not None:
        text = f"{execution.error.type}: {execution.error.message}"
        if execution.error.type == "permission_denied" and execution.policy == policy.ASK and approve is None:
            text += (
                " This tool asks for approval, and this client can show neither an approval form nor a "
                "link to Tessera's approval page (MCP elicitation). Call it with a token created with "
                "'May approve' (Toolsets → API tokens), or use it from a Tessera chat, where you can approve it."
            )
        if execution.error.details:
            text += "\n" + "\n".join(f"- {detail}" for detail in execution.error.details)
        return types.CallToolResult(content=[types.TextContent(text=text)], is_error=True)
    return _result(execution, caller["base_url"])


def _result(execution: executor.Execution, base_url: str) -> types.CallToolResult:
    """The executor's result as MCP content: an MCP toolset's own blocks (text, images, links),
    or the JSON result as text; then the sources it was drawn from, as links a client can open."""
    result = execution.result
    content: list[Any] = []
    structured: dict[str, Any] | None = None
    if mcp_results.is_content_result(result):
        for block in result.get("content") or []:
            if isinstance(block, dict):
                # Every block, with its audience kept: the client shows a user's block to its user
                # and gives a model's block to its model, as Tessera's chat does.
                audience = block.get("audience")
                annotations = types.Annotations(audience=[audience]) if audience in ("user", "assistant") else None
                for item in _block(block, base_url):
                    content.append(item.model_copy(update={"annotations": annotations}) if annotations else item)
        structured = result.get("structuredContent") if isinstance(result.get("structuredContent"), dict) else None
    else:
        content.append(
            types.TextContent(
                text=result if isinstance(result, str) else json.dumps(result, ensure_ascii=False, default=str)
            )
        )
        structured = result if isinstance(result, dict) else None
    if not content:
        content.append(types.TextContent(text=""))
    unlinked: list[str] = []
    for source in execution.sources:
        url = _absolute(source.get("url") or "", base_url)
        title = str(source.get("title") or url or "Source")[:200]
        if url:
            snippet = str(source.get("snippet") or "") or None
            content.append(
                types.ResourceLink(uri=url, name=title, title=f"[{source['n']}] {title}", description=snippet)
            )
        else:
            # A Workspace item has no page of its own: its citation is its text.
            line = f"[{source['n']}] {source.get('kind') or 'Source'}: {title}"
            unlinked.append(line + (f" — {source['snippet']}" if source.get("snippet") else ""))
    if unlinked:
        content.append(types.TextContent(text="Sources:\n" + "\n".join(unlinked)))
    return types.CallToolResult(content=content, structured_content=structured, is_error=False)


def _absolute(url: str, base_url: str) -> str:
    """A source's link as a client can open it: a web link as it is, a page of this site (an
    attached file) as an absolute URL of it; anything else is no link."""
    if url.startswith(("http://", "https://")):
        return url
    if url.startswith("/") and not url.startswith("//"):
        return base_url.rstrip("/") + url
    return ""


def _block(block: dict[str, Any], base_url: str) -> list[Any]:
    """One stored MCP content block (toolsets.mcp.results) for an MCP client."""
    kind = block.get("type")
    if kind == "text":
        return [types.TextContent(text=str(block.get("text") or ""))]
    if kind == "image":
        return [types.ImageContent(data=str(block.get("data") or ""), mime_type=str(block.get("mimeType") or ""))]
    if kind == "audio":
        return [types.AudioContent(data=str(block.get("data") or ""), mime_type=str(block.get("mimeType") or ""))]
    if kind == "resource_link":
        uri = str(block.get("uri") or "")
        name = str(block.get("name") or uri)[:300]
        server = str(block.get("server") or "")
        if not uri.startswith(("http://", "https://")) and server.startswith("mcp_"):
            # The resource lives on the server that linked it, which this client cannot reach:
            # Tessera's page reads it there, with the user's own access.
            path = reverse("toolsets:mcp_resource", args=[server.removeprefix("mcp_")]) + "?uri=" + quote(uri, safe="")
            return [types.ResourceLink(uri=base_url.rstrip("/") + path, name=name, description=f"{uri} ({name})")]
        if uri.startswith(("http://", "https://")):
            return [types.ResourceLink(uri=uri, name=name, description=str(block.get("description") or "") or None)]
        return [types.TextContent(text=f"Linked resource: {name} ({uri})")]
    if kind == "resource":
        return [types.TextContent(text=str(block.get("text") or f"A file: {block.get('uri') or ''}"))]
    return [types.TextContent(text=str(block.get("text") or ""))]


async def _delegate(
    caller: dict[str, Any], agent: Any, arguments: dict[str, Any], notify: Any, client: str
) -> types.CallToolResult:
    """An agent's run: a turn in a worker, as the OpenAI-compatible API starts it."""
    from . import openai as api

    task = arguments.get("task")
    context = arguments.get("context") or ""
    if not isinstance(task, str) or not task.strip() or not isinstance(context, str):
        return types.CallToolResult(
            content=[types.TextContent(text="validation_error: 'task' must be a non-empty string.")], is_error=True
        )
    user = await get_user_model().objects.aget(pk=caller["user_id"])
    found = await sync_to_async(api.targets)(user.pk)
    target = found.get(api.AGENT_PREFIX + agent.id)
    if target is None:
        return types.CallToolResult(
            content=[types.TextContent(text=f"permission_denied: {agent.name} is not available to you.")], is_error=True
        )
    brief = task + (f"\n\nContext:\n{context}" if context else "")
    conversation = api.Conversation(messages=[{"role": "user", "content": brief}], question=task)
    turn = await sync_to_async(api.start)(user, target, conversation, False, client)
    try:
        await _follow(turn, notify)
    except asyncio.CancelledError:
        # The client cancelled the call (or went away): the agent stops as at Stop in the chat.
        await asyncio.shield(sync_to_async(api.cancel)(turn.pk))
        raise
    result = await sync_to_async(api.result_of)(turn.pk, None, caller["base_url"])
    if result.failed:
        return types.CallToolResult(
            content=[types.TextContent(text=f"execution_error: {agent.name} could not finish: {result.error}")],
            is_error=True,
        )
    return types.CallToolResult(
        content=[types.TextContent(text=result.content or f"{agent.name} finished without an answer.")],
        structured_content={"answer": result.content, "tessera": result.extension},
    )


async def _follow(turn: Any, notify: Any) -> None:
    """What the reader of the chat would see on the tool cards, as it changes, as progress."""
    from . import openai as api

    seen: set[str] = set()
    async for state in api.states(turn.pk, turn.chat_id):
        # What the reader of the chat would see on the tool cards, as it changes.
        for step in state.steps:
            for card in step.cards:
                label = f"{card.get('display_name') or card.get('name') or 'Tool'}: {card.get('summary') or ''}"
                key = f"{step.index}:{card.get('dom_id')}:{label}"
                if key not in seen:
                    seen.add(key)
                    await notify(label.rstrip(": "), None)


server: Server[Any] = Server(
    "Tessera", version="1.0", instructions=INSTRUCTIONS, on_list_tools=list_tools, on_call_tool=call_tool
)


def _principal_of(caller: dict[str, Any]) -> str:
    """Who is calling: an API token, or an OAuth client (its tokens refresh; the client stays)."""
    who = f"token:{caller['token_id']}" if caller.get("token_id") else f"oauth:{caller.get('oauth_client', '')}"
    return f"{who}:user:{caller['user_id']}"


def _principal(ctx: Any) -> str | None:
    """Whose round trip a sealed request state belongs to: the caller (and its user)."""
    return _principal_of(_caller(ctx))


# The state of an ask tool's round trip, sealed with a key of this installation (every web
# process shares it), so a retry may reach any process and nobody can forge an approval.
server.middleware.append(
    RequestStateBoundary(
        RequestStateSecurity(
            keys=[hashlib.sha256(b"tessera/mcp/request-state:" + settings.SECRET_KEY.encode()).hexdigest()],
            bind_principal=_principal,
            ttl=3600,
        ),
        default_audience="tessera-mcp",
    )
)


class Endpoint:
    """The ASGI app at /mcp: checks the switch, the host and origin and the token, then hands the
    request to the SDK's session manager (started on first use: Daphne runs no ASGI lifespan).

    2026-07-28 requests are stateless. A handshake-era client gets a session (held by this
    process, owned by its token): the one way that era lets the server ask the client something
    during a call, which an ask tool's confirmation needs."""

    def __init__(self) -> None:
        self.manager: StreamableHTTPSessionManager | None = None
        self._started: asyncio.Event | None = None
        self._lock = asyncio.Lock()

    async def _ready(self) -> StreamableHTTPSessionManager:
        async with self._lock:
            if self.manager is None:
                manager = StreamableHTTPSessionManager(app=server, stateless=False, json_response=False)
                started = asyncio.Event()

                async def run() -> None:
                    async with manager.run():
                        started.set()
                        await anyio.sleep_forever()

                self._task = asyncio.ensure_future(run())
                await asyncio.wait_for(started.wait(), 10)
                self.manager = manager
        return self.manager

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        if scope.get("path", "").rstrip("/") != "/mcp":
            await _json(send, 404, "Not found.")
            return
        if not _host_allowed(scope):
            await _json(send, 421, "This host is not served here.")
            return
        if _origin_header(scope) and not origins.allowed(scope):
            await _json(send, 403, "Requests from this origin are not allowed.")
            return
        if not (await sync_to_async(AppSettings.load)()).mcp_server:
            await _json(send, 404, "Tessera's MCP server is switched off on this server.")
            return
        request = ASGIRequest(scope, io.BytesIO())
        caller = await sync_to_async(_authenticate)(request)
        if caller is None:
            # Where a client finds how to get a token (RFC 9728): the MCP authorization flow.
            oauth.use_forwarded_scheme(request)
            presented = bool(request.headers.get("Authorization"))
            header = oauth.challenge(request, "invalid_token" if presented else None)
            await _json(
                send,
                401,
                "A valid token is needed: Authorization: Bearer with an API token (tsk_…) or an OAuth "
                "access token for this server.",
                [(b"www-authenticate", header.encode("latin-1"))],
            )
            return
        # Links a client opens (approval page, files, resources) point back here.
        oauth.use_forwarded_scheme(request)
        caller["base_url"] = request.build_absolute_uri("/")
        # The SDK binds a handshake-era session to the principal that opened it: another token
        # presenting its id is answered as if it did not exist.
        principal = AccessToken(token="-", client_id=_principal_of(caller), scopes=[], subject=str(caller["user_id"]))
        scope = {**scope, SCOPE_KEY: caller, "user": AuthenticatedUser(principal)}
        manager = await self._ready()
        await manager.handle_request(scope, receive, _json_rpc_errors(send))


def _json_rpc_errors(send: Any) -> Any:
    """The SDK answers some refusals at the HTTP level in plain text or with no body at all
    (a wrong Content-Type, Accept or method): a client's library reads JSON-RPC errors, so those
    become one, with the same status and headers."""
    held: dict[str, Any] | None = None
    body = b""

    async def wrapped(message: dict[str, Any]) -> None:
        nonlocal held, body
        if message["type"] == "http.response.start":
            headers = {k.lower(): v for k, v in message.get("headers") or []}
            if message["status"] >= 400 and not headers.get(b"content-type", b"").startswith(b"application/json"):
                held = message
                return
        elif message["type"] == "http.response.body" and held is not None:
            body += message.get("body", b"")
            if message.get("more_body"):
                return
            text = body.decode("utf-8", "replace").strip()[:500] or HTTPStatus(held["status"]).phrase
            shaped = error_body("/mcp", text)
            kept = [
                (k, v) for k, v in held.get("headers") or [] if k.lower() not in (b"content-type", b"content-length")
            ]
            await send(
                {
                    **held,
                    "headers": [
                        *kept,
                        (b"content-type", b"application/json"),
                        (b"content-length", str(len(shaped)).encode()),
                    ],
                }
            )
            held = None
            await send({"type": "http.response.body", "body": shaped})
            return
        await send(message)

    return wrapped


def _authenticate(request: ASGIRequest) -> dict[str, Any] | None:
    """The caller of a request (blocking): an API token, or an OAuth access token issued by this
    server for this endpoint (chat/api/oauth.py), with what it may reach."""
    header = request.headers.get("Authorization", "")
    if not header.strip():
        # How the MCP authorization flow starts (the 401 tells the client where to sign in): no
        # credentials is not a failed sign-in, or connecting a few apps would lock the user out.
        return None
    scheme, _, presented = header.partition(" ")
    presented = presented.strip()
    if scheme.lower() == "bearer" and presented and not presented.startswith(ApiToken.PREFIX):
        return oauth.caller_for(request, presented)
    record = token_from(request)
    if record is None:
        return None
    ApiToken.objects.filter(pk=record.pk).update(last_used_at=timezone.now())
    return {
        "user_id": record.user_id,
        "can_approve": record.can_approve,
        "token_id": record.pk,
        "token_name": f"token {record.name}",
        "tools": record.may_use_tools,
        "agents": record.may_use_agents,
    }


def _origin_header(scope: dict[str, Any]) -> bool:
    return any(name.lower() == b"origin" for name, _ in scope.get("headers") or [])


def _host_allowed(scope: dict[str, Any]) -> bool:
    host = next((v.decode("latin-1") for k, v in scope.get("headers") or [] if k.lower() == b"host"), "")
    domain, _ = split_domain_port(host)
    return bool(domain) and validate_host(domain, settings.ALLOWED_HOSTS)


async def _json(send: Any, status: int, message: str, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    # A JSON-RPC error without an id, as the SDK answers what it refuses before any method runs.
    body = error_body("/mcp", message)
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
            + (headers or []),
        }
    )
    await send({"type": "http.response.body", "body": body})


endpoint = Endpoint()
