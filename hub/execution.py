"""`POST /toolsets/<toolset_id>/execute/<method>`: run one tool over HTTP, through the same
executor (and so the same availability, validation, limits and audit) as the agent loop.

Auth: a personal API token (`Authorization: Bearer tsk_…`) or the browser session, which then
needs the CSRF token like any other session POST.

Tool policy applies as in a chat, except that nobody can be asked: a tool whose policy is Ask
runs only when the body says `"approve": true` and the caller may approve — a token created
with "may approve" (chosen at creation, never later), or the user's own browser session.
Anything else gets 403.
"""

from __future__ import annotations

import uuid
from typing import Any

from asgiref.sync import async_to_sync
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.middleware.csrf import CsrfViewMiddleware
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from core import strictjson
from toolsets import executor
from toolsets.base import qualified_name
from toolsets.registry import get_toolset

from .caller import resolve

STATUS = {
    "validation_error": 400,
    "permission_denied": 403,
    "unknown_tool": 404,
    "rate_limit_error": 429,
    "timeout_error": 504,
    "execution_error": 502,
    "circuit_open": 503,
}
MAX_BODY = 1_000_000


def _error(status: int, tool_call_id: str | None, type_: str, message: str, **extra: Any) -> JsonResponse:
    error = {"type": type_, "message": message, "retryable": type_ in ("rate_limit_error", "timeout_error"), **extra}
    return JsonResponse({"tool_call_id": tool_call_id, "error": error}, status=status)


def _authenticate(request: HttpRequest) -> tuple[int, bool] | JsonResponse:
    """(the user's id, whether the caller may approve Ask tools), or the refusal."""
    if request.headers.get("Authorization", ""):
        caller = resolve(request)
        if caller is None:
            return _error(401, None, "permission_denied", "Invalid or revoked API token.")
        if not caller.tools:
            return _error(403, None, "permission_denied", "This token may not run tools.")
        return caller.user_id, caller.can_approve
    if request.user.is_authenticated:
        # This view is exempt so tokens work; session callers still get the CSRF check.
        rejected = CsrfViewMiddleware(lambda r: HttpResponse()).process_view(request, _noop_view, (), {})
        if rejected is not None:
            return _error(403, None, "permission_denied", "CSRF check failed.")
        return request.user.pk, True
    return _error(401, None, "permission_denied", "Authentication required (session or Bearer token).")


def _noop_view(request: HttpRequest) -> HttpResponse:
    return HttpResponse()


@csrf_exempt
@require_POST
def execute(request: HttpRequest, toolset_id: str, method: str) -> HttpResponse:
    authenticated = _authenticate(request)
    if isinstance(authenticated, HttpResponse):
        return authenticated
    user_id, may_approve = authenticated
    toolset = get_toolset(toolset_id)
    if toolset is None or toolset.get(method) is None:
        return _error(404, None, "unknown_tool", f"No tool {method!r} in toolset {toolset_id!r}.")
    if len(request.body) > MAX_BODY:
        return _error(400, None, "validation_error", "Request body too large.")
    try:
        body = strictjson.loads(request.body or b"{}", max_bytes=MAX_BODY)
    except strictjson.InvalidJSON as exc:
        return _error(400, None, "validation_error", f"The body must be JSON: {exc}.")
    if not isinstance(body, dict):
        return _error(400, None, "validation_error", 'The body must be a JSON object: {"tool_call_id", "params"}.')
    tool_call_id = body.get("tool_call_id") or f"api_{uuid.uuid4().hex[:20]}"
    if not isinstance(tool_call_id, str) or len(tool_call_id) > 200 or not tool_call_id.isprintable():
        return _error(
            400, None, "validation_error", "tool_call_id must be a printable string of at most 200 characters."
        )
    params = body.get("params", {})
    if not isinstance(params, dict):
        return _error(400, tool_call_id, "validation_error", "params must be a JSON object.")
    approve = body.get("approve", False)
    if not isinstance(approve, bool):
        return _error(400, tool_call_id, "validation_error", "approve must be true or false.")
    if approve and not may_approve:
        return _error(
            403,
            tool_call_id,
            "permission_denied",
            'This token may not approve tools whose policy is Ask: create one with "May approve" on /toolsets/.',
        )
    result = async_to_sync(executor.execute)(
        qualified_name(toolset_id, method), params, user_id=user_id, tool_call_id=tool_call_id, pre_approved=approve
    )
    if result.error is not None:
        extra: dict[str, Any] = {}
        if result.error.details:
            extra["details"] = result.error.details
        if result.availability is not None and not result.availability.usable:
            extra["reason"] = result.availability.reason
        elif result.error.type == "permission_denied" and result.policy in ("ask", "deny"):
            extra["policy"] = result.policy
        return JsonResponse(
            {"tool_call_id": tool_call_id, "error": {**result.error.as_dict(), **extra}},
            status=STATUS.get(result.error.type, 500),
        )
    return JsonResponse({"tool_call_id": tool_call_id, "result": result.result}, json_dumps_params={"default": str})
