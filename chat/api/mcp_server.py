"""Tessera as an MCP server, at `/mcp`: its toolsets and agents for any MCP client (Claude
Desktop, IDEs, agent frameworks), under the same rules as the chat.

- Streamable HTTP, stateless (the 2026-07-28 revision's model, which any number of web processes
  serve alike); the `mcp` SDK answers handshake-era clients on the same endpoint.
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
  structured content, and citations as resource links. A tool whose policy is Ask runs only for a
  token created with *may approve*; otherwise the result is an error that says so. An agent runs
  in a Celery worker, as in the chat (chat/api/openai.py starts its turn), and its progress
  streams as notifications.
- Origin checked against the page's own origin and CSRF_TRUSTED_ORIGINS, and Host against
  ALLOWED_HOSTS (DNS-rebinding protection, as the specification requires).
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
from typing import Any

import anyio
import mcp_types as types
from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.handlers.asgi import ASGIRequest
from django.http.request import split_domain_port, validate_host
from django.utils import timezone
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from core import origins
from toolsets import availability, executor, policy
from toolsets.auth import token_from
from toolsets.base import qualified_name
from toolsets.models import ApiToken
from toolsets.registry import all_toolsets

from ..agents import registry as agent_registry
from ..agents.base import tool_name as agent_tool_name
from ..models import AppSettings
from . import oauth

log = logging.getLogger(__name__)

SCOPE_KEY = "tessera.mcp"
ASK_NOTE = " (Asks for approval: runs only for a token that may approve.)"
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
    available = availability.for_user(user_id)
    app = AppSettings.load()
    admin_policies = {toolset_id: state.admin_policy for toolset_id, state in available.items()}
    policies = policy.PolicyBook(user_id, admin_policies)
    tools: list[types.Tool] = []
    for toolset in all_toolsets().values() if tools_scope else ():
        state = available.get(toolset.id)
        if state is None or not state.usable or not app.exposes("mcp_server", "toolsets", toolset.id):
            continue
        for tool in toolset.tools:
            resolved = policies.get(toolset, tool).policy
            if resolved == policy.DENY:
                continue
            tools.append(
                types.Tool(
                    name=qualified_name(toolset.id, tool.name),
                    title=f"{toolset.name}: {tool.display_name}",
                    description=tool.description
                    + (
                        " (Asks for approval: runs only for a token that may approve.)"
                        if resolved == policy.ASK
                        else ""
                    ),
                    input_schema=tool.parameters or {"type": "object", "properties": {}},
                    annotations=types.ToolAnnotations(
                        title=tool.display_name,
                        read_only_hint=not tool.side_effects,
                        destructive_hint=tool.side_effects,
                        open_world_hint=toolset.id.startswith("mcp_") or toolset.id in ("web", "exa"),
                    ),
                )
            )
    for agent_id, agent_state in agent_registry.availability(user_id, toolsets=available).items():
        if not agent_state.usable or not agents_scope or not app.exposes("mcp_server", "agents", agent_id):
            continue
        agent = agent_state.agent
        tools.append(
            types.Tool(
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
        )
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


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
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
    offered = {
        tool.name
        for tool in await sync_to_async(listed_tools)(
            caller["user_id"], tools_scope=caller["tools"], agents_scope=caller["agents"]
        )
    }
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
    if agent is not None:
        return await _delegate(caller, agent, arguments, notify, _client_name(ctx, caller))
    execution = await executor.execute(
        params.name,
        arguments,
        user_id=caller["user_id"],
        tool_call_id=f"mcp_{ctx.request_id}"[:200],
        pre_approved=caller["can_approve"],
        progress=progress,
        offered=offered,
        offered_in="offered by this server",
        client=_client_name(ctx, caller),
    )
    if execution.error is not None:
        text = f"{execution.error.type}: {execution.error.message}"
        if execution.error.type == "permission_denied" and execution.policy == policy.ASK:
            text += (
                " This tool asks for approval: call it with a token created with 'May approve' "
                "(Toolsets → API tokens), or use it from a Tessera chat, where you can approve it."
            )
        if execution.error.details:
            text += "\n" + "\n".join(f"- {detail}" for detail in execution.error.details)
        return types.CallToolResult(content=[types.TextContent(text=text)], is_error=True)
    result = execution.result
    content: list[Any] = [
        types.TextContent(
            text=result if isinstance(result, str) else json.dumps(result, ensure_ascii=False, default=str)
        )
    ]
    for source in execution.sources:
        url = source.get("url") or ""
        if url.startswith(("http://", "https://")):
            content.append(types.ResourceLink(uri=url, name=str(source.get("title") or url)[:200]))
    structured = result if isinstance(result, dict) else None
    return types.CallToolResult(content=content, structured_content=structured, is_error=False)


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
    result = await sync_to_async(api.result_of)(turn.pk, None)
    if result.failed:
        return types.CallToolResult(
            content=[types.TextContent(text=f"execution_error: {agent.name} could not finish: {result.error}")],
            is_error=True,
        )
    return types.CallToolResult(
        content=[types.TextContent(text=result.content or f"{agent.name} finished without an answer.")],
        structured_content={"answer": result.content, "tessera": result.extension},
    )


server: Server[Any] = Server(
    "Tessera", version="1.0", instructions=INSTRUCTIONS, on_list_tools=list_tools, on_call_tool=call_tool
)


class Endpoint:
    """The ASGI app at /mcp: checks the switch, the host and origin and the token, then hands the
    request to the SDK's stateless session manager (started on first use: Daphne runs no ASGI
    lifespan)."""

    def __init__(self) -> None:
        self.manager: StreamableHTTPSessionManager | None = None
        self._started: asyncio.Event | None = None
        self._lock = asyncio.Lock()

    async def _ready(self) -> StreamableHTTPSessionManager:
        async with self._lock:
            if self.manager is None:
                manager = StreamableHTTPSessionManager(app=server, stateless=True, json_response=False)
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
        scope = {**scope, SCOPE_KEY: caller}
        manager = await self._ready()
        await manager.handle_request(scope, receive, send)


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
    body = json.dumps({"error": message}).encode()
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
