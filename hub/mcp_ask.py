"""Ask tools over Tessera's MCP server, for a caller that may not approve (an API token without
*May approve*, an OAuth client without `mcp:approve`): the token's owner approves or denies on
Tessera's approval page (chat/question_views.py, signed in, CSRF-checked), which the client opens
for them through URL-mode elicitation (`elicitation/create` during the call in the handshake era,
an `InputRequiredResult` the client answers by calling again in the 2026-07-28 revision).

The client's own confirmation form (form-mode elicitation) is never used: whoever holds the token
would answer it, so a client could approve itself and *May approve* would mean nothing. A client
that cannot open the page gets an error saying where the owner approves instead.

The question is an approval in the one pending-question store (`core.questions`), like a chat's
approval card: the same wait, the same answer-once, the same answer view behind the page."""

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

from core import questions
from toolsets.arguments import validation_errors
from toolsets.models import PolicySettings
from toolsets.policy import approval as approval_mod
from toolsets.policy.approval import ApprovalRequest, Decision
from toolsets.registry import resolve

from .caller import Caller
from .turns import loop_redis

log = logging.getLogger(__name__)

INPUT_KEY = "tessera_approval"
STATE_PREFIX = "tessera:mcp:approval-state"


def _url_capable(ctx: Any) -> bool:
    """Whether this client declared URL-mode elicitation (it can open Tessera's page for its user)."""
    found = getattr(ctx.session, "client_capabilities", None)
    elicitation = getattr(found, "elicitation", None) if found is not None else None
    return elicitation is not None and elicitation.url is not None


def refusal_text(base_url: str) -> str:
    """What a caller that may not approve, and cannot open the approval page, is told."""
    return (
        " This tool asks for approval, which only the person this token belongs to can give, in "
        f"Tessera ({base_url.rstrip('/')}): a client's own answer does not count. This client cannot "
        "send them to Tessera's approval page (it declares no URL-mode elicitation, MCP elicitation "
        "with a link). Use a client that can, run the tool from a Tessera chat (the approval card "
        "asks there), or call it with a token created with 'May approve' (account page → API tokens; "
        "OAuth: the mcp:approve scope)."
    )


async def ask(
    ctx: Any, params: types.CallToolRequestParams, caller: Caller, arguments: dict[str, Any], client: str
) -> Any:
    """How this call's approval is asked for: an approver for the executor (None: nobody can be
    asked, the call fails saying where the owner approves), or, in the 2026-07-28 revision, the
    `InputRequiredResult` that sends the client's user to the page before it calls again."""
    found = resolve(params.name)
    if found is None or validation_errors(found[1], arguments):
        return None  # the executor says what is wrong; nobody is asked about a call that cannot run
    toolset, tool = found
    display_name = f"{toolset.label}: {tool.display_name}"
    url = _url_capable(ctx)
    redis = loop_redis()
    if ctx.session.protocol_version in MODERN_PROTOCOL_VERSIONS:
        return await _ask_by_round_trip(ctx, params, caller, arguments, client, display_name, url, redis)
    if not ctx.session.can_send_request or not url:
        return None
    related = ctx.request_id

    async def approve(request: ApprovalRequest) -> Decision:
        await approval_mod.open_request(
            redis, request, chat_id=None, turn_id=None, user_id=caller.user_id, client=client
        )
        try:
            link = _review_url(caller.base_url, request.id)
            opened = await ctx.session.elicit_url(
                f"Tessera: approve or deny {display_name} in your browser.", link, request.id, related
            )
            if opened.action != "accept":
                # Declining to open the page is the one answer a client may give on its own.
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
    caller: Caller,
    arguments: dict[str, Any],
    client: str,
    display_name: str,
    url: bool,
    redis: Any,
) -> Any:
    """The 2026-07-28 way (multi round-trip requests): the first call answers `input_required`
    with the page's link; the retry carries the state this server sealed (the SDK's boundary
    checks it is ours, unexpired, for this tool, these arguments and this token), and the answer
    is the one the owner gave on the page. A state is good for one retry: replaying an approval
    does not run the tool twice."""
    state = _state(params.request_state)
    responses = params.input_responses or {}
    if state is not None and INPUT_KEY in responses:
        fresh = await redis.set(f"{STATE_PREFIX}:{state['nonce']}", "1", nx=True, ex=3600)
        if not fresh:
            return _refusal("This approval was already used; call the tool again to be asked again.")
        if not isinstance(state.get("approval_id"), str):
            # A state from a client's own form (as this server once asked): that answer never counts.
            return _refusal("Only the owner's answer on Tessera's approval page counts; call the tool again.")
        pending = approval_mod.ApprovalRequest(
            toolset_id="",
            tool="",
            name=params.name,
            display_name=display_name,
            arguments=arguments,
            timeout_s=0,
            id=state["approval_id"],
        )
        if getattr(responses[INPUT_KEY], "action", None) != "accept":
            # The client would not open the page: a denial, and nobody is left waiting.
            await approval_mod.close(redis, pending.id)
            decision = Decision(False, outcome=approval_mod.DENIED)
        else:
            # Whatever else the client sent (content included) is ignored: it says only that
            # the page was opened; the answer is the owner's, given there.
            asked = await questions.find(redis, pending.id, approval_mod.KIND)
            if asked is None:
                # Closed, or past its deadline: an answer given in time outlives the question.
                decision = approval_mod.decision(await questions.answered(redis, pending.id))
            else:
                pending.deadline = asked.deadline
                try:
                    decision = await approval_mod.wait(redis, pending)
                finally:
                    await asyncio.shield(approval_mod.close(redis, pending.id))

        async def answered(request: ApprovalRequest) -> Decision:
            return decision

        return answered
    if not url:
        return None
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
    await approval_mod.open_request(redis, pending, chat_id=None, turn_id=None, user_id=caller.user_id, client=client)
    request = types.ElicitRequest(
        params=types.ElicitRequestURLParams(
            message=f"Tessera: approve or deny {display_name} in your browser.",
            url=_review_url(caller.base_url, pending.id),
            elicitation_id=pending.id,
        )
    )
    sealed = {"nonce": secrets.token_urlsafe(16), "approval_id": pending.id}
    return types.InputRequiredResult(input_requests={INPUT_KEY: request}, request_state=json.dumps(sealed))


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
