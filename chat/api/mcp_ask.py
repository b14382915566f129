"""Ask tools over Tessera's MCP server: the client's own confirmation form (an `elicitation/create`
in the handshake era, an `InputRequiredResult` the client answers by calling again in the
2026-07-28 revision), else a URL to Tessera's approval page, else nobody can be asked."""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
from typing import Any

import mcp_types as types
from asgiref.sync import sync_to_async
from django.urls import reverse
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from toolsets import executor
from toolsets.models import PolicySettings
from toolsets.policy import approval as approval_mod
from toolsets.policy.approval import ApprovalRequest, Decision
from toolsets.registry import resolve

log = logging.getLogger(__name__)

APPROVAL_FIELD = "approve"
INPUT_KEY = "tessera_approval"
STATE_PREFIX = "tessera:mcp:approval-state"


def _approval_form() -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            APPROVAL_FIELD: {
                "type": "boolean",
                "title": "Approve this call",
                "description": "Run the tool with these arguments (leave unticked to deny).",
                "default": False,
            },
            "reason": {"type": "string", "title": "Reason for a denial (optional)", "maxLength": 500},
        },
        "required": [APPROVAL_FIELD],
    }


def _question(display_name: str, arguments: dict[str, Any]) -> str:
    shown = json.dumps(arguments, ensure_ascii=False, sort_keys=True, default=str)
    if len(shown) > 1500:
        shown = shown[:1500] + "…"
    return f"Tessera: allow {display_name} to run with these arguments?\n{shown}"


def _capabilities(ctx: Any) -> tuple[bool, bool]:
    """(form, url): the elicitation modes this client declared."""
    found = getattr(ctx.session, "client_capabilities", None)
    elicitation = getattr(found, "elicitation", None) if found is not None else None
    if elicitation is None:
        return False, False
    form, url = elicitation.form, elicitation.url
    # A client that declares elicitation without modes supports forms (the 2025-06-18 meaning).
    return (form is not None or url is None), url is not None


def _decision(response: Any) -> Decision:
    """A client's answer to the confirmation form."""
    action = getattr(response, "action", None)
    content = getattr(response, "content", None) or {}
    if action == "accept" and content.get(APPROVAL_FIELD) is True:
        return Decision(True, outcome=approval_mod.APPROVED)
    reason = content.get("reason") if action == "accept" else ""
    reason = " ".join(str(reason or "").split())[: approval_mod.MAX_REASON]
    return Decision(False, reason=reason if reason.isprintable() else "", outcome=approval_mod.DENIED)


async def ask(
    ctx: Any, params: types.CallToolRequestParams, caller: dict[str, Any], arguments: dict[str, Any], client: str
) -> Any:
    """How this call's approval is asked for: an approver for the executor (None: nobody can be
    asked, the call fails naming the ways that work), or, in the 2026-07-28 revision, the
    `InputRequiredResult` that makes the client ask its user and send the call again."""
    found = resolve(params.name)
    if found is None or executor.validation_errors(found[1], arguments):
        return None  # the executor says what is wrong; nobody is asked about a call that cannot run
    toolset, tool = found
    display_name = f"{toolset.label}: {tool.display_name}"
    form, url = _capabilities(ctx)
    redis = _redis()
    if ctx.session.protocol_version in MODERN_PROTOCOL_VERSIONS:
        return await _ask_by_round_trip(ctx, params, caller, arguments, client, display_name, form, url, redis)
    if not ctx.session.can_send_request or not (form or url):
        return None
    related = ctx.request_id

    async def approve(request: ApprovalRequest) -> Decision:
        if form:
            try:
                answer = await asyncio.wait_for(
                    ctx.session.elicit_form(_question(display_name, arguments), _approval_form(), related),
                    request.timeout_s,
                )
            except TimeoutError:
                return Decision(False, outcome=approval_mod.TIMED_OUT)
            return _decision(answer)
        await approval_mod.open_request(
            redis, request, chat_id=None, turn_id=None, user_id=caller["user_id"], client=client
        )
        try:
            link = _review_url(caller["base_url"], request.id)
            opened = await ctx.session.elicit_url(
                f"Tessera: approve or deny {display_name} in your browser.", link, request.id, related
            )
            if opened.action != "accept":
                return Decision(False, outcome=approval_mod.DENIED)
            decision = await approval_mod.wait(redis, request)
            try:
                await ctx.session.send_elicit_complete(request.id, related)
            except Exception:  # the answer counts even if the client no longer listens
                log.debug("elicitation/complete could not be sent", exc_info=True)
            return decision
        finally:
            await asyncio.shield(approval_mod.close(redis, request.id))

    return approve


async def _ask_by_round_trip(
    ctx: Any,
    params: types.CallToolRequestParams,
    caller: dict[str, Any],
    arguments: dict[str, Any],
    client: str,
    display_name: str,
    form: bool,
    url: bool,
    redis: Any,
) -> Any:
    """The 2026-07-28 way (multi round-trip requests): the first call answers `input_required`;
    the retry carries the client's answer and the state this server sealed (the SDK's boundary
    checks it is ours, unexpired, for this tool, these arguments and this token). A state is
    good for one retry: replaying an approval does not run the tool twice."""
    state = _state(params.request_state)
    responses = params.input_responses or {}
    if state is not None and INPUT_KEY in responses:
        fresh = await redis.set(f"{STATE_PREFIX}:{state['nonce']}", "1", nx=True, ex=3600)
        if not fresh:
            return _refusal("This approval was already used; call the tool again to be asked again.")
        if state.get("approval_id"):
            # The user answers on Tessera's page; the client's retry says only that they went there.
            pending = approval_mod.ApprovalRequest(
                toolset_id="",
                tool="",
                name=params.name,
                display_name=display_name,
                arguments=arguments,
                timeout_s=0,
                id=state["approval_id"],
            )
            meta = await redis.get(f"{approval_mod.PREFIX}:{pending.id}")
            if meta is None:
                decision = await _answered(redis, pending.id)
            else:
                pending.deadline = float(json.loads(meta).get("deadline") or 0)
                try:
                    decision = await approval_mod.wait(redis, pending)
                finally:
                    await asyncio.shield(approval_mod.close(redis, pending.id))
        else:
            decision = _decision(responses[INPUT_KEY])

        async def answered(request: ApprovalRequest) -> Decision:
            return decision

        return answered
    if not (form or url):
        return None
    nonce = secrets.token_urlsafe(16)
    if form:
        request = types.ElicitRequest(
            params=types.ElicitRequestFormParams(
                message=_question(display_name, arguments), requested_schema=_approval_form()
            )
        )
        sealed = {"nonce": nonce}
    else:
        timeout_s = float((await sync_to_async(PolicySettings.load)()).approval_timeout_s)
        toolset_id, _, tool_name = params.name.removeprefix("toolset__").partition("__")
        pending = ApprovalRequest(
            toolset_id=toolset_id,
            tool=tool_name,
            name=params.name,
            display_name=display_name,
            arguments=arguments,
            timeout_s=timeout_s,
            always_allowable=False,
        )
        await approval_mod.open_request(
            redis, pending, chat_id=None, turn_id=None, user_id=caller["user_id"], client=client
        )
        request = types.ElicitRequest(
            params=types.ElicitRequestURLParams(
                message=f"Tessera: approve or deny {display_name} in your browser.",
                url=_review_url(caller["base_url"], pending.id),
                elicitation_id=pending.id,
            )
        )
        sealed = {"nonce": nonce, "approval_id": pending.id}
    return types.InputRequiredResult(input_requests={INPUT_KEY: request}, request_state=json.dumps(sealed))


async def _answered(redis: Any, approval_id: str) -> Decision:
    """An answer given after the request itself expired from Redis (the answer outlives it)."""
    raw = await redis.get(f"{approval_mod.PREFIX}:{approval_id}:answer")
    if not raw:
        return Decision(False, outcome=approval_mod.TIMED_OUT)
    data = json.loads(raw)
    approved = bool(data.get("approved"))
    return Decision(
        approved, str(data.get("reason", "")), outcome=approval_mod.APPROVED if approved else approval_mod.DENIED
    )


def _state(raw: str | None) -> dict[str, Any] | None:
    # Only ever plaintext this server sealed (the boundary rejects anything else before here).
    try:
        value = json.loads(raw) if raw else None
    except ValueError:
        return None
    return value if isinstance(value, dict) and isinstance(value.get("nonce"), str) else None


def _refusal(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=f"permission_denied: {text}")], is_error=True)


def _review_url(base_url: str, approval_id: str) -> str:
    return base_url.rstrip("/") + reverse("chat:approval_review", args=[approval_id])


def _redis() -> Any:
    from .openai import _redis as shared

    return shared()
