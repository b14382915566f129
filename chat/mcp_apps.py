"""The page's side of MCP Apps (docs/admin-guide/mcp-apps.md): what a card's View is given, and what a View
may ask of Tessera through the host (static/js/mcp_apps.js, built on the official app-bridge).

A View never reaches these endpoints itself: it lives on the sandbox origin and talks only to
the page by postMessage. The page's script relays its requests here, signed in as the user and
with the CSRF token, naming the tool call whose card shows the View; each request is checked
against that call's chat (its owner, its selection) and its server:

- `tools/call`: only a tool of the View's own server that its definition lets apps call, among
  the chat's selected tools or the server's app-only ones; run by the executor (policy, approval,
  rate limit, breaker, audit as a ToolExecution linked to the card's turn). An "ask" tool runs
  only once the user approved that call on the chat's approval card, shown under the View
  (chat.app_asking), which the View cannot reach.
- `resources/read`: only from the View's own server, selected by the chat, size-bounded.
- `ui/update-model-context`: kept for the chat's next turn (chat.app_context), size-bounded.

A shared page gets the View and the shown result only: it is display-only.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_GET, require_POST
from opentelemetry.trace import get_current_span

from core import ratelimit
from core.http import AuthedRequest
from core.redis_client import sync_client
from toolsets import executor
from toolsets.base import Tool, Toolset, qualified_name
from toolsets.mcp import app_sandbox, resources
from toolsets.mcp.lists import source
from toolsets.mcp.models import AppResource, MCPServer
from toolsets.models import ToolExecution
from toolsets.registry import get_toolset, resolve

from . import app_asking, app_context, share_copy
from .models import AppSettings, Chat, ChatShare
from .spend import budgets

MAX_BODY = 1_000_000
BLOCK_KEYS = ("type", "text", "data", "mimeType", "uri", "name", "title", "description", "resource")


class Refused(Exception):
    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def _app_tool(toolset: Toolset | None, key: str) -> Tool | None:
    tool = next((t for t in toolset.tools if t.name == key), None) if toolset is not None else None
    return tool if tool is not None and tool.app is not None and tool.app.get("sha256") else None


def _page(slug: str, sha256: str) -> AppResource | None:
    return AppResource.objects.filter(server__slug=slug, sha256=sha256).first()


def _origin(request: HttpRequest, slug: str, page: AppResource) -> str:
    """The server's own sandbox origin: the label its page asked for when no other server's
    page asks for the same, else one made from its slug."""
    domain = str(page.meta.get("domain") or "")
    if domain and AppResource.objects.filter(meta__domain=domain).exclude(server__slug=slug).exists():
        domain = ""
    return app_sandbox.sandbox_origin(request, slug, domain)


def _page_payload(request: HttpRequest, toolset: Toolset, tool: Tool, sha256: str) -> dict[str, Any]:
    """What the page needs to show a View: its HTML (the version `sha256`), where to sandbox it."""
    assert tool.app is not None
    slug = toolset.id.removeprefix("mcp_")
    page = _page(slug, sha256) or _page(slug, tool.app["sha256"])
    origin = _origin(request, slug, page) if page is not None else ""
    if page is None or not origin:
        raise Refused("This app cannot be shown here (no sandbox origin: see docs/admin-guide/mcp-apps.md).", 404)
    return {
        "html": page.html,
        "sandbox": {
            "url": app_sandbox.proxy_url(request, page.meta, origin),
            "origin": origin,
            "sandbox": app_sandbox.OUTER_SANDBOX,
            "allow": app_sandbox.allow_attribute(page.meta),
            "csp": page.meta.get("csp", {}),
        },
        "prefers_border": page.meta.get("prefersBorder"),
        "server": toolset.name,
        # The admin's word on the View's `ui/message`: sent at once, or shown to the user first.
        "confirm_messages": MCPServer.objects.filter(slug=slug, apps_confirm_messages=True).exists(),
        "tool": {
            "name": tool.app["name"],
            "title": tool.display_name,
            "description": tool.description,
            "inputSchema": tool.parameters,
        },
    }


def payload(request: HttpRequest, execution: ToolExecution, *, interactive: bool, result: Any) -> dict[str, Any]:
    """A call's View: the page it ran with (pinned by its hash: the same after a reload, even
    once an admin has accepted a newer one), its input, and its result or why it has none."""
    toolset = get_toolset(execution.toolset)
    tool = _app_tool(toolset, execution.tool)
    if toolset is None or tool is None or tool.app is None:
        raise Refused("This tool shows no app.", 404)
    success = execution.status == ToolExecution.Status.SUCCESS
    ended = execution.status in (ToolExecution.Status.ERROR, ToolExecution.Status.CANCELLED)
    return {
        **_page_payload(request, toolset, tool, execution.app_sha256),
        "input": execution.arguments if isinstance(execution.arguments, dict) else {},
        "status": str(execution.status),
        "result": call_tool_result(result) if success else None,
        "reason": (execution.error or "Stopped")[:300] if ended else "",
        "interactive": interactive,
    }


def call_tool_result(result: Any) -> dict[str, Any] | None:
    """A stored result (toolsets.mcp.results) as the protocol's CallToolResult: Tessera's own
    notes become text, its bookkeeping keys are dropped."""
    if not isinstance(result, dict) or not isinstance(result.get("content"), list):
        return None
    blocks = []
    for block in result["content"]:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "note":
            block = {"type": "text", "text": str(block.get("text", ""))}
        blocks.append({k: v for k, v in block.items() if k in BLOCK_KEYS})
    shaped: dict[str, Any] = {"content": blocks}
    if isinstance(result.get("structuredContent"), dict):
        shaped["structuredContent"] = result["structuredContent"]
    return shaped


def _owned(user_id: int, execution_id: int) -> tuple[ToolExecution, Chat]:
    execution = (
        ToolExecution.objects.select_related("turn__chat")
        .filter(pk=execution_id, user_id=user_id, toolset__startswith="mcp_")
        .first()
    )
    if execution is None or execution.turn is None or execution.turn.chat.owner_id != user_id:
        raise Refused("No such app.", 404)
    return execution, execution.turn.chat


def _json(request: HttpRequest) -> dict[str, Any]:
    if len(request.body) > MAX_BODY:
        raise Refused("The request is too large.", 413)
    try:
        data = json.loads(request.body or b"{}")
    except (ValueError, RecursionError):  # RecursionError: a body nested thousands deep
        raise Refused("The request is not JSON.") from None
    if not isinstance(data, dict):
        raise Refused("The request is not a JSON object.")
    return data


def _answer(done: Any) -> JsonResponse:
    return JsonResponse(done, safe=False)


def _refused(exc: Refused) -> JsonResponse:
    return JsonResponse({"error": str(exc)}, status=exc.status)


@login_required
@require_GET
def view(request: AuthedRequest, execution_id: int) -> JsonResponse:
    try:
        execution, _chat = _owned(request.user.pk, execution_id)
        return _answer(payload(request, execution, interactive=True, result=execution.result))
    except Refused as exc:
        return _refused(exc)


@login_required
@require_GET
def tool_view(request: AuthedRequest, chat_id: int, name: str) -> JsonResponse:
    """The View of a call the model is still writing (no execution yet): the tool's page as
    approved now, which the call will run with; its input follows on the card."""
    chat = Chat.objects.filter(pk=chat_id, owner_id=request.user.pk).first()
    found = resolve(name)
    toolset, tool = found if found else (None, None)
    if chat is None or toolset is None or tool is None or not toolset.id.startswith("mcp_"):
        return JsonResponse({"error": "No such app."}, status=404)
    if tool.name not in (chat.enabled_tools or {}).get(toolset.id, []) or _app_tool(toolset, tool.name) is None:
        return JsonResponse({"error": "No such app."}, status=404)
    try:
        found_payload = _page_payload(request, toolset, tool, "")
    except Refused as exc:
        return _refused(exc)
    return _answer(
        {**found_payload, "input": {}, "status": "pending", "result": None, "reason": "", "interactive": True}
    )


@require_GET
def shared_view(request: HttpRequest, token: str, execution_id: int) -> JsonResponse:
    """A View on a shared page: the shown part of the result only, and no requests back."""
    share = ChatShare.objects.filter(token=token, revoked_at=None).first()
    public = share is not None and share.public and _public_shares()
    if share is None or not (request.user.is_authenticated or public):
        return JsonResponse({"error": "No such app."}, status=404)
    execution = ToolExecution.objects.filter(
        pk=execution_id, turn__chat_id=share.chat_id, turn_id__in=share.turn_ids, toolset__startswith="mcp_"
    ).first()
    if execution is None:
        return JsonResponse({"error": "No such app."}, status=404)
    try:
        return _answer(payload(request, execution, interactive=False, result=share_copy.shown_result(execution)))
    except Refused as exc:
        return _refused(exc)


def _public_shares() -> bool:
    return bool(AppSettings.load().public_shares)


@dataclass(frozen=True)
class Allowed:
    """What a View's request may reach: its card's call and chat, its server, and the tool."""

    execution: ToolExecution
    chat: Chat
    toolset: Toolset
    tool: Tool
    server: MCPServer


def _callable(user_id: int, execution_id: int, name: Any) -> Allowed:
    """The tool a View of `execution_id`'s card may call by its server's name `name` (with no
    name: the checks every request passes); Refused otherwise (blocking)."""
    execution, chat = _owned(user_id, execution_id)
    server = MCPServer.objects.filter(
        slug=execution.toolset.removeprefix("mcp_"), enabled=True, apps_enabled=True
    ).first()
    toolset = get_toolset(execution.toolset)
    if server is None or toolset is None or _app_tool(toolset, execution.tool) is None:
        raise Refused("This app is not available.", 404)
    if not ratelimit.allow("mcp-app", user_id, int(settings.TESSERA["MCP_APP_REQUESTS_PER_MINUTE"]), window_s=60):
        raise Refused("Too many requests from apps: try again in a minute.", 429)
    _within_budget(user_id)
    if not isinstance(name, str):
        return Allowed(execution, chat, toolset, toolset.tools[0], server)
    tool = next((t for t in toolset.tools if t.app is not None and t.app["name"] == name), None)
    if tool is None or tool.app is None:
        raise Refused(f"{server.name} has no tool named {name[:100]!r} for its app.", 403)
    if not tool.app["callable"]:
        raise Refused(f"{server.name}'s {tool.display_name} may not be called by its app.", 403)
    selected = tool.name in (chat.enabled_tools or {}).get(toolset.id, [])
    if tool.model_visible and not selected:
        raise Refused(f"{toolset.label}: {tool.display_name} is not among the tools selected for this chat.", 403)
    return Allowed(execution, chat, toolset, tool, server)


def _within_budget(user_id: int) -> None:
    """A user whose budget is used up has their Views stopped with their turns: what a View
    asks of a server feeds the chat's next model call (blocking)."""
    used_up = [left for left in budgets.left_for(user_id, sync_client()) if left.share_used >= 1]
    if used_up:
        when = used_up[0].resets.strftime("%Y-%m-%d %H:%M UTC")
        raise Refused(f"{used_up[0].label} is used up until {when}: apps cannot call tools until then.", 429)


async def _user_id(request: HttpRequest) -> int:
    user = await request.auser()
    if user.pk is None:  # login_required let nobody else in
        raise Refused("Sign in first.", 403)
    return user.pk


@login_required
@require_POST
async def call_tool(request: AuthedRequest, execution_id: int) -> JsonResponse:
    """A View's `tools/call`, run by the executor for the card's chat and recorded with the
    card's turn. An "ask" tool waits here for the owner's answer on the chat's approval card."""
    try:
        data = _json(request)
        user_id = await _user_id(request)
        if not isinstance(data.get("name"), str):
            raise Refused("A tool call names a tool.")
        arguments = data.get("arguments") if data.get("arguments") is not None else {}
        if not isinstance(arguments, dict):
            raise Refused("A tool call's arguments are an object.")
        allowed = await sync_to_async(_callable)(user_id, execution_id, data["name"])
    except Refused as exc:
        return _refused(exc)
    card, chat, toolset, tool = allowed.execution, allowed.chat, allowed.toolset, allowed.tool
    # The request's span (core.tracing) says whose card's View made the call; the executor's
    # span for it nests under it.
    get_current_span().set_attributes(
        {
            "tessera.chat.id": chat.pk,
            "tessera.turn.id": card.turn_id or 0,
            "tessera.mcp_app.card_execution_id": card.pk,
            "tessera.turn.trace_id": card.turn.trace_id if card.turn is not None else "",
        }
    )
    asking = app_asking.ViewAsking(card, chat.pk, user_id, allowed.server.name)
    done = await executor.execute(
        qualified_name(toolset.id, tool.name),
        arguments,
        user_id=user_id,
        tool_call_id=f"app-{uuid.uuid4().hex[:12]}",
        turn_id=card.turn_id,
        chat_id=chat.pk,
        approve=asking.approve,
        offered={qualified_name(toolset.id, tool.name)},
        client=f"mcp-app: {allowed.server.name}",
    )
    if done.error is not None:
        return _answer({"content": [{"type": "text", "text": done.error.message}], "isError": True})
    return _answer(call_tool_result(done.result) or {"content": []})


@login_required
@require_POST
async def read_resource(request: AuthedRequest, execution_id: int) -> JsonResponse:
    """A View's `resources/read`, from its own server only."""
    try:
        data = _json(request)
        uri = data.get("uri")
        if not isinstance(uri, str) or not resources.valid_uri(uri):
            raise Refused("A read names a resource's URI.")
        user_id = await _user_id(request)
        allowed = await sync_to_async(_callable)(user_id, execution_id, None)
        server = allowed.server
        found = await sync_to_async(source)(user_id, allowed.chat.enabled_tools, server.slug)
        if found is None:
            raise Refused(f"{server.name} is not selected for this chat.", 403)
        contents = await resources.read(found, user_id, uri)
    except Refused as exc:
        return _refused(exc)
    except Exception as exc:  # the server's failure, told to the View as the error of its request
        return JsonResponse({"error": str(exc)[:500]}, status=502)
    limit = int(settings.TESSERA["MCP_APP_MAX_BYTES"])
    kept = [{k: c[k] for k in ("uri", "mimeType", "text", "blob", "_meta") if k in c} for c in contents]
    if len(json.dumps(kept)) > limit:
        return JsonResponse({"error": f"The resource is larger than {limit / 1_000_000:g} MB."}, status=413)
    return _answer({"contents": kept})


@login_required
@require_POST
def update_context(request: AuthedRequest, execution_id: int) -> JsonResponse:
    """A View's `ui/update-model-context`: what the model reads at the chat's next turn."""
    try:
        data = _json(request)
        allowed = _callable(request.user.pk, execution_id, None)
    except Refused as exc:
        return _refused(exc)
    text = app_context.text_of(data.get("content"), data.get("structuredContent"))
    kept = app_context.store(allowed.chat.pk, execution_id, allowed.server.name, text)
    return _answer({"kept_characters": kept})
