"""Ask tools over `/mcp` (hub/mcp_ask.py) for callers that may not approve: only the token's
owner, on Tessera's approval page, approves; a client's own answer never runs the tool. Through
the official `mcp` client against the real stack, in both eras."""

from __future__ import annotations

from typing import Any

import httpx
import mcp_types as types
import pytest
from mcp.client import Client

from hub.models import ApiToken
from toolsets.models import PolicySettings, ToolExecution, ToolRule

from .mcp_client import MODES, answer_on_the_page, declare_elicitation, oauth_token, run, signed_in, text

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

CALL = ("toolset__clock_math__calculate", {"expression": "6 * 7"})


@pytest.fixture(autouse=True)
def ask_policy(db: Any) -> None:
    ToolRule.objects.create(toolset_id="clock_math", tool="calculate", policy="ask")


def _record(user: Any) -> ToolExecution:
    return ToolExecution.objects.get(user=user, tool="calculate")


async def _call(client: Client) -> Any:
    return await client.call_tool(*CALL)


def _self_approving(asked: list[Any]) -> Any:
    """A client that answers every question itself: ticks the form's box, 'opens' any link."""

    async def answer(context: Any, params: Any) -> types.ElicitResult:
        asked.append(params)
        if params.mode == "form":
            return types.ElicitResult(action="accept", content={"approve": True})
        return types.ElicitResult(action="accept")

    return answer


@pytest.mark.parametrize("mode", MODES)
def test_a_clients_own_form_answer_never_runs_an_ask_tool(
    stack: Any, switched_on: None, token: str, user: Any, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    declare_elicitation(monkeypatch, form=True, url=False)
    asked: list[Any] = []
    result = run(stack.url, token, mode, _call, elicitation_callback=_self_approving(asked))
    # Never asked (its answer would not count), told who approves and where.
    assert asked == []
    assert result.is_error and "only the person this token belongs to" in text(result)
    assert stack.url in text(result) and "URL-mode elicitation" in text(result) and "May approve" in text(result)
    assert (_record(user).status, _record(user).error_type) == ("error", "permission_denied")


@pytest.mark.parametrize("mode", MODES)
def test_a_client_that_answers_for_its_user_waits_for_the_owner_and_runs_nothing(
    stack: Any, switched_on: None, token: str, user: Any, mode: str
) -> None:
    """The official client declares both modes: it is sent to the page, and 'accepting' without
    the owner answering there runs nothing (at the approval timeout it counts as denied)."""
    PolicySettings(approval_timeout_s=2).save()
    asked: list[Any] = []
    result = run(stack.url, token, mode, _call, elicitation_callback=_self_approving(asked))
    assert [params.mode for params in asked] == ["url"]
    assert asked[0].url.startswith(f"{stack.url}/approvals/")
    assert result.is_error and "Nobody approved this call" in text(result)
    assert (_record(user).approval, _record(user).status) == ("timed_out", "error")


@pytest.mark.parametrize("mode", MODES)
def test_the_owner_approves_on_tesseras_page_and_the_call_runs(
    stack: Any, switched_on: None, token: str, user: Any, mode: str
) -> None:
    cookies = signed_in(user)
    opened: list[str] = []

    async def open_link(context: Any, params: Any) -> types.ElicitResult:
        assert params.mode == "url", "a client that may not approve is never shown a form"
        opened.append(params.url)
        # A POST that did not come from the page (no CSRF token) answers nothing.
        async with httpx.AsyncClient(cookies=cookies, timeout=30) as forged:
            refused = await forged.post(params.url, data={"decision": "approve"}, headers={"Origin": stack.url})
        assert refused.status_code == 403
        answered = await answer_on_the_page(stack.url, cookies, params.url, "approve")
        assert answered.status_code == 200 and "Approved" in answered.text
        return types.ElicitResult(action="accept")

    result = run(stack.url, token, mode, _call, elicitation_callback=open_link)
    assert not result.is_error, result.content
    assert "42" in text(result)
    assert len(opened) == 1 and opened[0].startswith(f"{stack.url}/approvals/") and opened[0].endswith("/review/")
    assert (_record(user).approval, _record(user).status, _record(user).client) == (
        "approved",
        "success",
        "mcp: Test Desktop",
    )
    # Answered: the page says so, and nobody can answer again.
    again = httpx.get(opened[0], cookies=cookies, timeout=30)
    assert again.status_code == 404 and "no longer waiting" in again.text


@pytest.mark.parametrize("mode", MODES)
def test_a_client_that_will_not_open_the_page_denies_the_call(
    stack: Any, switched_on: None, token: str, user: Any, mode: str
) -> None:
    async def decline(context: Any, params: Any) -> types.ElicitResult:
        return types.ElicitResult(action="decline")

    result = run(stack.url, token, mode, _call, elicitation_callback=decline)
    assert result.is_error and "denied" in text(result)
    assert (_record(user).approval, _record(user).status) == ("denied", "error")


def test_an_oauth_client_without_mcp_approve_needs_the_owner_and_one_with_it_runs_directly(
    stack: Any, switched_on: None, user: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    tools_only, _ = oauth_token(user, stack.url, name="Claude", scope="mcp:tools")
    declare_elicitation(monkeypatch, form=True, url=False)
    asked: list[Any] = []
    refused = run(stack.url, tools_only, "auto", _call, elicitation_callback=_self_approving(asked))
    assert asked == [] and refused.is_error and "only the person this token belongs to" in text(refused)
    assert "mcp:approve" in text(refused)
    approving, _ = oauth_token(user, stack.url, name="Claude", scope="mcp:tools mcp:approve")
    allowed = run(stack.url, approving, "auto", _call, elicitation_callback=_self_approving(asked))
    assert asked == [] and not allowed.is_error and "42" in text(allowed)
    assert ToolExecution.objects.get(user=user, tool="calculate", status="success").approval == "pre_approved"


def test_an_api_token_that_may_approve_runs_ask_tools_directly(stack: Any, switched_on: None, user: Any) -> None:
    approving = ApiToken.issue(user, "trusted", can_approve=True)[1]
    allowed = run(stack.url, approving, "auto", _call)
    assert not allowed.is_error and "42" in text(allowed)


def test_a_forged_self_answered_or_replayed_round_trip_runs_nothing(
    stack: Any, switched_on: None, token: str, user: Any
) -> None:
    """The 2026 round trip: the retry carries state this server sealed (good once, for this tool,
    these arguments and this token), and the answer that counts is the owner's on the page."""
    PolicySettings(approval_timeout_s=2).save()
    cookies = signed_in(user)
    accepted = {"tessera_approval": types.ElicitResult(action="accept", content={"approve": True})}

    async def work(client: Client) -> Any:
        session = client.session

        async def call(expression: str, **retry: Any) -> Any:
            return await session.call_tool(CALL[0], {"expression": expression}, allow_input_required=True, **retry)

        first = await call("1 + 1")
        assert isinstance(first, types.InputRequiredResult) and first.request_state
        request = (first.input_requests or {}).get("tessera_approval")
        assert isinstance(request, types.ElicitRequest) and isinstance(request.params, types.ElicitRequestURLParams)
        link = request.params.url
        # No state at all: the client cannot approve on its own; it is asked again.
        forged = await call("1 + 1", input_responses=accepted)
        # The state of another call (other arguments) is refused by the SDK's boundary.
        try:
            await call("2 + 2", input_responses=accepted, request_state=first.request_state)
            moved = None
        except Exception as exc:
            moved = exc
        # Its own state, answered by the client itself: the owner never approved.
        own = await call("3 + 3")
        self_answered = await call("3 + 3", input_responses=accepted, request_state=own.request_state)
        # The owner approves the first call on the page; the client calls again, once, twice.
        answered = await answer_on_the_page(stack.url, cookies, link, "approve")
        assert answered.status_code == 200, answered.text
        good = await call("1 + 1", input_responses=accepted, request_state=first.request_state)
        replayed = await call("1 + 1", input_responses=accepted, request_state=first.request_state)
        return forged, moved, self_answered, good, replayed

    async def never(context: Any, params: Any) -> types.ElicitResult:
        raise AssertionError("driven by hand")

    forged, moved, self_answered, good, replayed = run(stack.url, token, "auto", work, elicitation_callback=never)
    assert isinstance(forged, types.InputRequiredResult)
    assert moved is not None and "requestState" in str(moved)
    assert isinstance(self_answered, types.CallToolResult) and self_answered.is_error
    assert "Nobody approved this call" in text(self_answered)
    assert isinstance(good, types.CallToolResult) and not good.is_error and "2" in text(good)
    assert isinstance(replayed, types.CallToolResult) and replayed.is_error and "already used" in text(replayed)
    assert ToolExecution.objects.filter(user=user, tool="calculate", status="success").count() == 1


def test_the_approval_page_is_only_its_users(
    stack: Any, switched_on: None, token: str, user: Any, other_user: Any
) -> None:
    mallory = signed_in(other_user)
    seen: list[int] = []

    async def someone_else(context: Any, params: Any) -> types.ElicitResult:
        async with httpx.AsyncClient(cookies=mallory, timeout=30) as browser:
            seen.append((await browser.get(params.url)).status_code)
        async with httpx.AsyncClient(timeout=30) as stranger:
            seen.append((await stranger.get(params.url)).status_code)
        return types.ElicitResult(action="decline")

    result = run(stack.url, token, "legacy", _call, elicitation_callback=someone_else)
    assert seen == [404, 302]  # another user learns nothing; a stranger is sent to sign in
    assert result.is_error and "denied" in text(result)
    assert _record(user).approval == "denied"


def test_a_client_that_cannot_ask_gets_an_error_saying_who_approves_and_where(
    stack: Any, switched_on: None, token: str, user: Any
) -> None:
    for mode in MODES:
        refused = run(stack.url, token, mode, _call)
        assert refused.is_error and "May approve" in text(refused)
        assert "elicitation" in text(refused) and stack.url in text(refused)
    assert set(ToolExecution.objects.filter(user=user, tool="calculate").values_list("error_type", flat=True)) == {
        "permission_denied"
    }
