"""A tool card's view: what a call is, how it went, and for a delegation what its agent did."""

from __future__ import annotations

import json
from typing import Any

from django.urls import reverse

from toolsets.availability import DISABLED_BY_USER, NEEDS_SETUP, NO_API_KEY
from toolsets.base import humanize, split_qualified_name
from toolsets.mcp.results import is_content_result
from toolsets.registry import get_toolset, resolve

from .. import dom, summaries
from ..agents.base import DELEGATE_PREFIX
from ..agents.registry import builtin_agents
from ..app_input import partial_arguments
from .question import KINDS
from .values import cached_text, pretty_json

RESULT_DISPLAY_LIMIT = 20_000
# The refusals (toolsets.policy.gate) the user ends by setting the toolset up.
FIXABLE_BY_USER = (DISABLED_BY_USER, NEEDS_SETUP, NO_API_KEY)
STATUS_LABELS = {
    "pending": "Calling...",
    "calling": "Calling...",
    "waiting": "Needs approval",
    "success": "Completed",
    "error": "Error",
    "cancelled": "Stopped",
}


def tool_display_name(name: str) -> str:
    """ "Exa: Search"; for a tool nobody registered, a readable name derived from its own."""
    if name.startswith(DELEGATE_PREFIX):
        # A subagent: its name (an admin's agent is named by its slug until its card starts).
        agent = builtin_agents().get(name.removeprefix(DELEGATE_PREFIX))
        return agent.name if agent else humanize(name.removeprefix(DELEGATE_PREFIX))
    found = resolve(name)
    if found:
        toolset, tool = found
        return f"{toolset.label}: {tool.display_name}"
    parts = split_qualified_name(name)
    if parts:
        known = get_toolset(parts[0])
        return f"{known.label if known else humanize(parts[0])}: {humanize(parts[1])}"
    return humanize(name) or "Tool"


def _connect(name: str, error_type: str, error: str) -> tuple[str, str]:
    """The "Connect <toolset>" action on an error card whose toolset the user must set up: only
    for a refusal that says so (the gate's "<toolset>: <reason>."), never for a denial (the
    user's, an admin's Deny, a tool not offered), which setting anything up would not change."""
    parts = split_qualified_name(name)
    toolset = get_toolset(parts[0]) if parts else None
    if toolset is None or error_type != "permission_denied":
        return "", ""
    said = error.strip().removeprefix(f"{toolset.name}: ").removesuffix(".")
    if said not in FIXABLE_BY_USER:
        return "", ""
    return reverse("toolsets:settings") + f"#toolset-{toolset.id}", f"Connect {toolset.label}"


def card(
    turn_id: int | str,
    step: int,
    position: int,
    *,
    name: str,
    call_id: str = "",
    arguments: Any = None,
    status: str = "pending",
    result: Any = None,
    error: str = "",
    error_type: str = "",
    duration_ms: int | None = None,
    progress_text: str = "",
    progress_percent: float | None = None,
    execution_id: int | None = None,
    delegation: dict[str, Any] | None = None,
    question: dict[str, Any] | None = None,
    approval: dict[str, Any] | None = None,
    elicitation: dict[str, Any] | None = None,
    cached_at: str | None = None,
    partial_input: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A tool card's view. `turn_id` is the id prefix of the steps it belongs to (a turn's id,
    or a subagent's lane prefix, see chat.dom.lane). `question`: what the call waits for the
    person to answer (`presenters.question`; `approval` and `elicitation` name its kind)."""
    question = (question or approval or elicitation) if status == "waiting" else None
    waiting = KINDS.get(question["kind"]) if question else None
    found = resolve(name)
    tool = found[1] if found else None
    display_name = tool_display_name(name)
    result_text = "" if result is None else pretty_json(result)
    truncated = len(result_text) > RESULT_DISPLAY_LIMIT
    if status == "waiting":
        summary = waiting.summary if waiting else KINDS["approval"].summary
    elif status in ("pending", "calling"):
        summary = progress_text or summaries.status_text(tool, display_name, arguments if status == "calling" else None)
    elif status == "success":
        summary = summaries.summarize(tool, result)
    else:
        summary = summaries.summarize_error(error) if error else "Stopped"
    connect_url, connect_label = _connect(name, error_type, error) if status == "error" else ("", "")
    if delegation:
        # A subagent's card: its agent's name, and what it is doing or did.
        display_name, summary = delegation.get("name") or display_name, delegation.get("message") or summary
    template = tool.card_template if tool is not None and not delegation else ""
    view = {
        "dom_id": dom.card(turn_id, step, position),
        # A tool that shows its calls its own way: its template gets the arguments and the
        # result (or, while it runs, the result so far) as they are.
        "template": template,
        "raw": {"arguments": arguments, "result": result} if template else None,
        "open": bool(template and tool is not None and tool.card_open),
        "name": name,
        "call_id": call_id,
        "display_name": display_name,
        "hints": list(tool.hints) if tool is not None else [],
        "status": status,
        "status_label": waiting.status_label if waiting else STATUS_LABELS.get(status, status),
        "summary": summary,
        "arguments": "" if _no_arguments(arguments) else pretty_json(arguments),
        "result": result_text[:RESULT_DISPLAY_LIMIT],
        # Content blocks (MCP tools) render by type instead of as JSON, when the card is rendered
        # (chat/templatetags/tool_content.py): a card is kept as JSON.
        "content": result if is_content_result(result) else None,
        "result_truncated": truncated,
        "full_result_url": reverse("toolsets:execution", args=[execution_id]) if truncated and execution_id else "",
        "error": error,
        "error_type": error_type,
        "duration_ms": duration_ms,
        "progress_percent": None if progress_percent is None else max(0, min(100, round(progress_percent))),
        "connect_url": connect_url,
        "connect_label": connect_label,
        "delegation": delegation,
        # What the call waits for the person to answer, of any kind (chat/_question.html): an
        # "ask" call's approval, an MCP server's question during the call.
        "question": question,
        # For a result reused from the cache: when the call that produced it ran.
        "cached_at": cached_at,
        "cached_text": cached_text(cached_at) if cached_at else "",
        # An MCP App's View (static/js/mcp_apps.js loads it into the card), from the moment the
        # model names the tool; or why the server's page was refused.
        "app": app_view(found[0].name, dom.card(turn_id, step, position), name, status, arguments, partial_input)
        | {"execution_id": execution_id, "reason": (error or ("Stopped" if status == "cancelled" else ""))[:300]}
        if found and tool is not None and tool.app and tool.app.get("sha256") and not delegation
        else None,
        "app_refused": str(tool.app.get("refused") or "") if found and tool is not None and tool.app else "",
    }
    # What the card's View is told of its call, read by static/js/mcp_apps.js.
    view["app_json"] = json.dumps(view["app"]) if view["app"] else ""
    # A call still starting has nothing to show under its header: no empty strip there until
    # its arguments (or anything else) are known.
    view["has_body"] = any(
        view[key]
        for key in (
            *("delegation", "connect_url", "arguments", "question"),
            *("error", "result", "cached_text", "app", "app_refused"),
        )
    ) or bool(view["content"] or view["template"] or duration_ms is not None)
    return view


def app_view(
    server: str, dom_id: str, name: str, status: str, arguments: Any, partial_input: dict[str, Any] | None
) -> dict[str, Any]:
    """What a card's View is told of its call (static/js/mcp_apps.js): the input so far (while
    the model writes it), then whole, then how the call ended."""
    if status == "pending":
        shown = partial_input
    elif isinstance(arguments, dict):
        shown = arguments
    else:
        parsed = partial_arguments(arguments) if isinstance(arguments, str) else None
        shown = parsed if parsed is not None else {}
    return {"box": f"mcp-app-{dom_id}", "server": server, "tool": name, "status": status, "input": shown}


def _no_arguments(arguments: Any) -> bool:
    """None, "" and an empty object: a call without arguments shows no "Arguments {}"."""
    if arguments is None or arguments == {}:
        return True
    return isinstance(arguments, str) and arguments.strip() in ("", "{}")


def delegation(
    agent_id: str, name: str, lane: str, *, task: str, context: str, state: str = "working", result: str = ""
) -> dict[str, Any]:
    """What a delegation card keeps (live, and in its execution's result): the agent, its lane
    (the path of the call), the task, and — once done — how it ended and what it answered."""
    messages = {
        "working": f"{name} is working on it…",
        "done": f"{name} finished.",
        "failed": f"{name} could not finish.",
        "stopped": f"{name} was stopped.",
    }
    return {
        "agent": agent_id,
        "name": name,
        "lane": lane,
        "task": task,
        "context": context,
        "state": state,
        "message": messages.get(state, messages["working"]),
        "result": result,
    }


def card_from_execution(
    turn_id: int | str,
    step_index: int,
    position: int,
    function: dict[str, Any],
    call: dict[str, Any],
    execution: Any,
) -> dict[str, Any]:
    name = function.get("name", "")
    if execution is None:
        # The call was stored but never ran (e.g. the worker died): say so rather than hide it.
        return card(
            turn_id,
            step_index,
            position,
            name=name,
            call_id=call.get("id", ""),
            arguments=function.get("arguments"),
            status="cancelled",
            error="This tool call did not run.",
        )
    status = {"success": "success", "error": "error", "cancelled": "cancelled"}.get(execution.status, "calling")
    stored = execution.result if isinstance(execution.result, dict) else {}
    delegated = stored.get("delegation") if isinstance(stored.get("delegation"), dict) else None
    if delegated and (status == "calling" or delegated.get("state") == "working"):
        # It never reported back (Stop, or its worker died): its card says it was stopped.
        delegated = {**delegated, "state": "stopped", "message": f"{delegated.get('name', 'The agent')} was stopped."}
    return card(
        turn_id,
        step_index,
        position,
        name=name,
        call_id=execution.tool_call_id,
        arguments=execution.arguments if execution.arguments else function.get("arguments"),
        status=status,
        result=execution.result if status == "success" and not delegated else None,
        error=execution.error,
        error_type=execution.error_type,
        # A stopped delegation ends before it can report its duration; the live card had none.
        duration_ms=None if delegated and status == "cancelled" else execution.duration_ms,
        execution_id=execution.pk,
        delegation=delegated,
        cached_at=execution.cached_at.isoformat()
        if getattr(execution, "cache_hit", False) and execution.cached_at
        else None,
    )
