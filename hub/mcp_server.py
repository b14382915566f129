"""Tessera as an MCP server, at `/mcp`: its toolsets and agents for any MCP client (Claude
Desktop, IDEs, agent frameworks), under the same rules as the chat.

- Streamable HTTP, stateless for the 2026-07-28 revision (which any number of web processes
  serve alike); the `mcp` SDK answers handshake-era clients on the same endpoint, each with a
  session owned by its caller (the only way that era lets a server ask during a call), a few
  per caller and per user (mcp_sessions.py).
- The ASGI app in front (mcp_endpoint.py): the switch (*App settings → MCP server*, off until an
  admin switches it on), Host and Origin (DNS-rebinding protection), and the caller: an API
  token (`Authorization: Bearer tsk_…`) or an OAuth access token this server issued for this
  endpoint (hub/oauth.py: the MCP authorization flow, which a 401's `WWW-Authenticate`
  points clients to), counted by the sign-in throttle like any token. An OAuth caller is its
  client id, never the name it gives itself.
- `tools/list`: the tools usable *for this user*, from the same availability and policies as the
  chat (a toolset the user cannot use, and any tool whose policy is Deny, is not listed), with
  titles, schemas and annotations that tell the truth (a tool without side effects says it is
  read-only). Agents are listed as `delegate_to_<agent>`.
- `tools/call`: through the one executor (validation, rate limits, breaker, cache, audit: the
  `ToolExecution` names the client, "mcp: <its name>"), with progress notifications, text and
  structured content, MCP servers' own content passed through, and sources as links a client can
  open (or as text). A client's cancellation stops the tool (audited as cancelled) or the agent's
  turn. An agent runs in a Celery worker, as in the chat (hub/turns.py starts its turn),
  and its progress streams as notifications.
- Ask tools (mcp_ask.py): a caller that may not approve sends its user to Tessera's approval
  page (URL-mode elicitation, chat/question_views.py), where the token's owner answers; the
  client's own answer never counts. A caller that may (an API token created with *may approve*,
  an OAuth client granted `mcp:approve`) runs them directly.
- MCP Apps (mcp_apps.py): a client that negotiated the extension gets Tessera's cards (task
  tables, calendar, email, meeting, post preview, sources, the approval card) as `ui://tessera/…`
  resources on the tools whose results show them, each result's card rendered as the page does.
  Any other client gets the same tools and results as without it.
- Refusals are JSON-RPC errors with a 4xx status, the SDK's own plain-text ones included.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from typing import Any
from urllib.parse import quote

import mcp_types as types
from asgiref.sync import sync_to_async
from django.conf import settings
from django.urls import reverse
from mcp.server.lowlevel import Server
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity

from chat.agents import registry as agent_registry
from chat.agents.base import tool_name as agent_tool_name
from chat.models import AppSettings
from chat.worker import fair_share
from toolsets import availability, executor, policy
from toolsets.base import qualified_name
from toolsets.mcp import results as mcp_results
from toolsets.registry import all_toolsets
from toolsets.sources import SourceBook

from . import mcp_apps, mcp_ask, turns
from .caller import Caller
from .schema import Conversation

log = logging.getLogger(__name__)

SCOPE_KEY = "tessera.mcp"
ASK_NOTE = (
    " (Asks for approval: the user approves it on Tessera's approval page, which the client opens;"
    " a token that may approve runs it directly.)"
)
INSTRUCTIONS = (
    "Tessera's tools and agents, with the signed-in user's keys, policies and limits. Tools named "
    "delegate_to_<agent> hand a task to one of Tessera's agents, which works with its own tools."
)


def _caller(ctx: Any) -> Caller:
    request = ctx.request
    scope = getattr(request, "scope", None) or {}
    found = scope.get(SCOPE_KEY)
    if not isinstance(found, Caller):
        raise PermissionError("Not authenticated.")  # the endpoint never lets such a request through
    return found


def _client_name(ctx: Any, caller: Caller) -> str:
    """The client's own name (every 2026-07-28 request carries it; a handshake-era client
    sends it once, which a stateless server does not see again), else the token's."""
    params = getattr(ctx.session, "client_params", None)
    info = getattr(params, "client_info", None)
    name = getattr(info, "name", "") if info is not None else ""
    if caller.oauth_client_id:
        # The name the user saw on the consent page, not one the client may change per request.
        return f"mcp: {caller.oauth_client}"[:200]
    return f"mcp: {name or caller.label}"[:200]


def listed_tools(
    user_id: int, *, tools_scope: bool = True, agents_scope: bool = True, cards: bool = False, can_approve: bool = False
) -> list[types.Tool]:
    """What this user may call with this token, as MCP tools (blocking); with `cards` (the client
    negotiated MCP Apps), each names the card its result shows."""
    offered = _offers(user_id, tools_scope=tools_scope, agents_scope=agents_scope, cards=cards, can_approve=can_approve)
    return [tool for tool, _ in offered] + ([mcp_apps.approval_tool()] if cards and tools_scope else [])


def _offers(
    user_id: int, *, tools_scope: bool, agents_scope: bool, cards: bool = False, can_approve: bool = False
) -> list[tuple[types.Tool, str]]:
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
        if toolset.offered_to is not None and not toolset.offered_to(user_id):
            continue
        for tool in toolset.tools:
            resolved = policies.get(toolset, tool).policy
            if resolved == policy.DENY or not tool.model_visible:  # an MCP App's own tools are its View's
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
            if cards:
                asks = resolved == policy.ASK and not can_approve
                listed = mcp_apps.with_card(listed, toolset.id, tool, asks=asks)
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
        caller.user_id,
        tools_scope=caller.tools,
        agents_scope=caller.agents,
        cards=mcp_apps.negotiated(ctx),
        can_approve=caller.can_approve,
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

    cards = mcp_apps.negotiated(ctx)
    if cards and caller.tools and params.name == mcp_apps.APPROVAL_TOOL:
        # The approval card's own tool (app-only: the View calls it), offered with the extension.
        client = _client_name(ctx, caller)
        return await mcp_apps.approval_card(caller.user_id, client, arguments, caller.base_url, turns.loop_redis())
    # What this token may call here (the list a client got): anything else is refused and
    # audited by the executor, as a model's call to a tool it was not offered is in the chat.
    offers = await sync_to_async(_offers)(caller.user_id, tools_scope=caller.tools, agents_scope=caller.agents)
    offered = {tool.name: resolved for tool, resolved in offers}
    agent = agent_registry.agent_for_tool(params.name, await sync_to_async(agent_registry.agents)())
    if agent is not None and params.name not in offered:
        return types.CallToolResult(
            content=[types.TextContent(text=f"permission_denied: {agent.name} is not offered here.")], is_error=True
        )
    if not (caller.agents if agent is not None else caller.tools):
        kind = "agents" if agent is not None else "tools"
        return types.CallToolResult(
            content=[types.TextContent(text=f"permission_denied: this token may not run {kind}.")], is_error=True
        )
    client = _client_name(ctx, caller)
    if agent is not None:
        return await _delegate(caller, agent, arguments, notify, client)
    approve: Any = None
    if offered.get(params.name) == policy.ASK and not caller.can_approve:
        asking = await mcp_ask.ask(ctx, params, caller, arguments, client)
        if isinstance(asking, (types.InputRequiredResult, types.CallToolResult)):
            return asking  # asking the client first, or a replayed answer refused
        approve = asking
    book = SourceBook()
    execution = await executor.execute(
        params.name,
        arguments,
        user_id=caller.user_id,
        tool_call_id=f"mcp_{ctx.request_id}"[:200],
        pre_approved=caller.can_approve,
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
            text += mcp_ask.refusal_text(caller.base_url)
        if execution.error.details:
            text += "\n" + "\n".join(f"- {detail}" for detail in execution.error.details)
        return types.CallToolResult(content=[types.TextContent(text=text)], is_error=True)
    shown = _result(execution, caller.base_url)
    if cards and (card := mcp_apps.card_meta(params.name, execution.result, execution.sources, caller.base_url)):
        # The card for the View only: the content and structured content stay as they are.
        return shown.model_copy(update={"meta": card})
    return shown


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
    caller: Caller, agent: Any, arguments: dict[str, Any], notify: Any, client: str
) -> types.CallToolResult:
    """An agent's run: a turn in a worker, as the OpenAI-compatible API starts it."""
    task = arguments.get("task")
    context = arguments.get("context") or ""
    if not isinstance(task, str) or not task.strip() or not isinstance(context, str):
        return types.CallToolResult(
            content=[types.TextContent(text="validation_error: 'task' must be a non-empty string.")], is_error=True
        )
    found = await sync_to_async(turns.targets)(caller.user_id)
    target = found.get(turns.AGENT_PREFIX + agent.id)
    if target is None:
        return types.CallToolResult(
            content=[types.TextContent(text=f"permission_denied: {agent.name} is not available to you.")], is_error=True
        )
    brief = task + (f"\n\nContext:\n{context}" if context else "")
    conversation = Conversation(messages=[{"role": "user", "content": brief}], question=task)
    try:
        start = sync_to_async(turns.start)
        turn = await start(caller, target, conversation, False, client)
    except fair_share.Busy as exc:
        # Over the caller's share of the workers: said plainly, with when to try again.
        return types.CallToolResult(
            content=[types.TextContent(text=f"rate_limited: {exc.message} (retry after {exc.retry_after} s)")],
            is_error=True,
        )
    try:
        await _follow(turn, notify)
    except asyncio.CancelledError:
        # The client cancelled the call (or went away): the agent stops as at Stop in the chat.
        await asyncio.shield(sync_to_async(turns.cancel)(turn.pk))
        raise
    result = await sync_to_async(turns.result_of)(turn.pk, None, caller.base_url)
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
    seen: set[str] = set()
    async for state in turns.states(turn.pk, turn.chat_id):
        # What the reader of the chat would see on the tool cards, as it changes.
        for step in state.steps:
            for card in step.cards:
                label = f"{card.get('display_name') or card.get('name') or 'Tool'}: {card.get('summary') or ''}"
                key = f"{step.index}:{card.get('dom_id')}:{label}"
                if key not in seen:
                    seen.add(key)
                    await notify(label.rstrip(": "), None)


server: Server[Any] = Server(
    "Tessera",
    version="1.0",
    instructions=INSTRUCTIONS,
    on_list_tools=list_tools,
    on_call_tool=call_tool,
    on_list_resources=mcp_apps.list_resources,
    on_read_resource=mcp_apps.read_resource,
)
server.extensions = dict(mcp_apps.EXTENSION)


def _principal(ctx: Any) -> str | None:
    """Whose round trip a sealed request state belongs to: the caller (and its user)."""
    return _caller(ctx).principal


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
