"""POST /toolsets/<toolset_id>/execute/<method>: auth, status codes, and the shared executor."""

from __future__ import annotations

import asyncio
import json
from typing import Annotated, Any

import pytest
from django.test import Client

from hub.models import ApiToken
from toolsets import availability, registry
from toolsets.base import ToolFailure, Toolset, tool
from toolsets.models import ToolExecution, ToolsetConfig, UserToolsetConfig

pytestmark = pytest.mark.django_db(transaction=True)


@tool(timeout_s=0.3)
async def slow() -> str:
    """Take too long."""
    await asyncio.sleep(5)
    return "late"


@tool()
def echo(text: Annotated[str, "Text to echo"]) -> dict[str, str]:
    """Echo the text."""
    return {"text": text}


@tool()
def locked_echo(text: Annotated[str, "Text to echo"]) -> dict[str, str]:
    """Echo the text, with a key."""
    return {"text": text}


@tool()
def upstream_busy() -> None:
    """Fail like a rate-limited upstream."""
    raise ToolFailure("Upstream says slow down", error_type="rate_limit_error", retryable=True)


@pytest.fixture(autouse=True)
def test_toolsets(monkeypatch: pytest.MonkeyPatch) -> dict[str, Toolset]:
    toolsets = dict(registry.all_toolsets())
    toolsets["probe"] = Toolset(id="probe", name="Probe", description="Test tools.", tools=[slow, echo, upstream_busy])
    toolsets["locked"] = Toolset(id="locked", name="Locked", description="", tools=[locked_echo], needs_api_key=True)
    monkeypatch.setattr(registry, "all_toolsets", lambda: toolsets)
    monkeypatch.setattr(availability, "all_toolsets", lambda: toolsets)
    return toolsets


def url(toolset: str, method: str) -> str:
    return f"/toolsets/{toolset}/execute/{method}"


def post(client: Client, path: str, body: Any, **headers: str) -> Any:
    return client.post(path, data=json.dumps(body), content_type="application/json", headers=headers)


def token_for(user: Any) -> str:
    return ApiToken.issue(user, "test")[1]


def test_token_call_returns_result_and_is_audited(user: Any) -> None:
    token = token_for(user)
    response = post(
        Client(),
        url("clock_math", "calculate"),
        {"tool_call_id": "c1", "params": {"expression": "6*7"}},
        Authorization=f"Bearer {token}",
    )
    assert response.status_code == 200
    assert response.json() == {"tool_call_id": "c1", "result": {"expression": "6*7", "result": 42}}
    record = ToolExecution.objects.get(tool_call_id="c1")
    assert (record.user_id, record.toolset, record.tool, record.status) == (
        user.pk,
        "clock_math",
        "calculate",
        "success",
    )
    assert ApiToken.objects.get(user=user).last_used_at is not None


def test_session_needs_csrf(user: Any) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    body = {"tool_call_id": "s1", "params": {"expression": "1+1"}}
    assert post(client, url("clock_math", "calculate"), body).status_code == 403
    client.get("/toolsets/")
    csrf = client.cookies["csrftoken"].value
    response = post(client, url("clock_math", "calculate"), body, **{"X-CSRFToken": csrf})
    assert response.status_code == 200 and response.json()["result"]["result"] == 2


def test_no_auth_is_401() -> None:
    response = post(Client(), url("clock_math", "calculate"), {"params": {"expression": "1"}})
    assert response.status_code == 401
    assert response.json()["error"]["type"] == "permission_denied"


def test_bad_and_revoked_tokens_are_401(user: Any) -> None:
    record, token = ApiToken.issue(user, "old")
    assert (
        post(
            Client(),
            url("clock_math", "calculate"),
            {"params": {"expression": "1"}},
            Authorization="Bearer tsk_not-a-real-token",
        ).status_code
        == 401
    )
    client = Client()
    client.force_login(user)
    client.post(f"/account/tokens/{record.pk}/revoke/")
    assert (
        post(
            Client(), url("clock_math", "calculate"), {"params": {"expression": "1"}}, Authorization=f"Bearer {token}"
        ).status_code
        == 401
    )


def test_bad_params_are_400_with_details(user: Any) -> None:
    token = token_for(user)
    response = post(
        Client(),
        url("probe", "echo"),
        {"tool_call_id": "v1", "params": {"text": 5, "extra": 1}},
        Authorization=f"Bearer {token}",
    )
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["type"] == "validation_error" and error["retryable"] is False
    assert any("text" in d for d in error["details"]) and any("extra" in d for d in error["details"])
    assert post(Client(), url("probe", "echo"), [1, 2], Authorization=f"Bearer {token}").status_code == 400


def test_unknown_toolset_or_method_is_404(user: Any) -> None:
    token = token_for(user)
    assert post(Client(), url("nope", "x"), {}, Authorization=f"Bearer {token}").status_code == 404
    assert post(Client(), url("clock_math", "nope"), {}, Authorization=f"Bearer {token}").status_code == 404


def test_unusable_toolset_is_403_with_reason(user: Any) -> None:
    token = token_for(user)
    response = post(Client(), url("locked", "locked_echo"), {"params": {"text": "hi"}}, Authorization=f"Bearer {token}")
    assert response.status_code == 403
    assert response.json()["error"]["reason"] == "API key not configured"
    ToolsetConfig.objects.create(toolset_id="clock_math", enabled=False)
    response = post(
        Client(), url("clock_math", "calculate"), {"params": {"expression": "1"}}, Authorization=f"Bearer {token}"
    )
    assert response.status_code == 403 and response.json()["error"]["reason"] == "Disabled by administrator"


def test_a_token_cannot_use_toolsets_its_owner_disabled(user: Any, other_user: Any) -> None:
    UserToolsetConfig.objects.create(user=other_user, toolset_id="clock_math", enabled=False)
    token = token_for(other_user)
    response = post(
        Client(), url("clock_math", "calculate"), {"params": {"expression": "1"}}, Authorization=f"Bearer {token}"
    )
    assert response.status_code == 403 and response.json()["error"]["reason"] == "Disabled in settings"
    # The same toolset still works for a user who did not disable it.
    assert (
        post(
            Client(),
            url("clock_math", "calculate"),
            {"params": {"expression": "1"}},
            Authorization=f"Bearer {token_for(user)}",
        ).status_code
        == 200
    )


def test_rate_limit_is_429(user: Any) -> None:
    ToolsetConfig.objects.create(toolset_id="probe", rate_limit_per_minute=2)
    token = token_for(user)
    codes = [
        post(Client(), url("probe", "echo"), {"params": {"text": "x"}}, Authorization=f"Bearer {token}").status_code
        for _ in range(3)
    ]
    assert codes == [200, 200, 429]
    assert post(Client(), url("probe", "upstream_busy"), {}, Authorization=f"Bearer {token}").status_code == 429


def test_timeout_is_504(user: Any) -> None:
    token = token_for(user)
    response = post(Client(), url("probe", "slow"), {"tool_call_id": "t1"}, Authorization=f"Bearer {token}")
    assert response.status_code == 504
    assert response.json() == {
        "tool_call_id": "t1",
        "error": {"type": "timeout_error", "message": "The tool did not finish within 0.3 seconds.", "retryable": True},
    }


def test_tokens_are_stored_hashed_and_shown_once(user: Any) -> None:
    client = Client()
    client.force_login(user)
    page = client.post("/account/tokens/", {"name": "CI"}).content.decode()
    token = page.split('class="token-value">')[1].split("<")[0]
    assert token.startswith("tsk_")
    stored = ApiToken.objects.get(user=user)
    assert stored.token_hash != token and token not in stored.token_hash
    assert token not in client.get("/account/").content.decode()


def test_tool_executions_are_filterable_in_admin(user: Any) -> None:
    from django.contrib.auth import get_user_model

    admin_user = get_user_model().objects.create_superuser("boss", password="x-long-password-1")
    token = token_for(user)
    post(Client(), url("clock_math", "calculate"), {"params": {"expression": "1+1"}}, Authorization=f"Bearer {token}")
    client = Client()
    client.force_login(admin_user)
    for query in (
        "",
        f"?user__id__exact={user.pk}",
        "?status=success",
        "?toolset=clock_math",
        "?duration=fast",
        "?error_type=",
        "?q=alice",
    ):
        response = client.get("/admin/toolsets/toolexecution/" + query)
        assert response.status_code == 200, query
        assert "calculate" in response.content.decode(), query


# --- Tool policy ----------------------------------------------------------------------------------


@tool(side_effects=True)
def note(text: Annotated[str, "Text to note"]) -> dict[str, str]:
    """Note something down (a side effect: Ask by default)."""
    return {"noted": text}


@tool(policy="deny")
def never() -> str:
    """Never allowed."""
    return "no"


@pytest.fixture
def policy_toolset(test_toolsets: dict[str, Toolset]) -> Toolset:
    test_toolsets["notes"] = Toolset(id="notes", name="Notes", description="", tools=[note, never])
    return test_toolsets["notes"]


def test_an_ask_tool_is_refused_without_approval(user: Any, policy_toolset: Toolset) -> None:
    token = token_for(user)
    response = post(Client(), url("notes", "note"), {"params": {"text": "x"}}, Authorization=f"Bearer {token}")
    assert response.status_code == 403
    error = response.json()["error"]
    assert error["type"] == "permission_denied" and error["policy"] == "ask"
    assert "needs the user's approval" in error["message"]
    assert ToolExecution.objects.get(tool="note").status == "error"


def test_approve_needs_a_token_created_with_the_flag(user: Any, policy_toolset: Toolset) -> None:
    plain = token_for(user)
    body = {"params": {"text": "x"}, "approve": True}
    refused = post(Client(), url("notes", "note"), body, Authorization=f"Bearer {plain}")
    assert refused.status_code == 403 and "may not approve" in refused.json()["error"]["message"]
    assert not ToolExecution.objects.filter(tool="note").exists()  # refused before anything ran

    _, approver = ApiToken.issue(user, "ci", can_approve=True)
    ok = post(Client(), url("notes", "note"), body, Authorization=f"Bearer {approver}")
    assert ok.status_code == 200 and ok.json()["result"] == {"noted": "x"}
    assert ToolExecution.objects.get(tool="note", status="success").approval == "pre_approved"
    # The flag alone is not consent: each call must say so.
    again = post(Client(), url("notes", "note"), {"params": {"text": "y"}}, Authorization=f"Bearer {approver}")
    assert again.status_code == 403


def test_approve_must_be_a_boolean(user: Any, policy_toolset: Toolset) -> None:
    _, approver = ApiToken.issue(user, "ci", can_approve=True)
    for value in ("true", 1, None, {"yes": True}):
        response = post(
            Client(),
            url("notes", "note"),
            {"params": {"text": "x"}, "approve": value},
            Authorization=f"Bearer {approver}",
        )
        assert response.status_code == 400, value


def test_the_users_own_session_may_approve(user: Any, policy_toolset: Toolset) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    client.get("/toolsets/")
    csrf = client.cookies["csrftoken"].value
    response = post(client, url("notes", "note"), {"params": {"text": "x"}, "approve": True}, **{"X-CSRFToken": csrf})
    assert response.status_code == 200


def test_a_denied_tool_is_refused_even_with_approval(user: Any, policy_toolset: Toolset) -> None:
    _, approver = ApiToken.issue(user, "ci", can_approve=True)
    response = post(Client(), url("notes", "never"), {"approve": True}, Authorization=f"Bearer {approver}")
    assert response.status_code == 403 and response.json()["error"]["policy"] == "deny"


def test_an_open_breaker_is_503(user: Any) -> None:
    from toolsets.policy import breaker

    board = breaker.Breakers()
    for _ in range(5):
        board.record([breaker.tool_scope("clock_math", "calculate")], ok=False)
    token = token_for(user)
    response = post(
        Client(), url("clock_math", "calculate"), {"params": {"expression": "1"}}, Authorization=f"Bearer {token}"
    )
    assert response.status_code == 503
    assert response.json()["error"]["type"] == "circuit_open" and response.json()["error"]["retryable"] is True


def test_tokens_page_creates_an_approving_token(user: Any) -> None:
    client = Client()
    client.force_login(user)
    client.post("/account/tokens/", {"name": "plain"})
    client.post("/account/tokens/", {"name": "deploy", "can_approve": "1"})
    assert dict(ApiToken.objects.values_list("name", "can_approve")) == {"plain": False, "deploy": True}


def test_the_tokens_form_chooses_what_a_token_reaches(user: Any) -> None:
    client = Client()
    client.force_login(user)
    client.post("/account/tokens/", {"name": "both", "scopes": "1", "tools": "1", "agents": "1"})
    client.post("/account/tokens/", {"name": "agents only", "scopes": "1", "agents": "1"})
    client.post("/account/tokens/", {"name": "older form"})  # no choices sent: both, as before
    assert client.post("/account/tokens/", {"name": "nothing", "scopes": "1"}).status_code == 400
    scopes = {
        name: (tools, agents)
        for name, tools, agents in ApiToken.objects.values_list("name", "may_use_tools", "may_use_agents")
    }
    assert scopes == {"both": (True, True), "agents only": (False, True), "older form": (True, True)}


def test_a_token_that_may_not_run_tools_is_refused_by_the_execution_api(user: Any) -> None:
    _, token = ApiToken.issue(user, "agents only", tools=False)
    response = Client().post(
        "/toolsets/clock_math/execute/calculate",
        {"params": {"expression": "1 + 1"}},
        content_type="application/json",
        headers={"Authorization": f"Bearer {token}"},
    )
    assert response.status_code == 403 and "may not run tools" in response.json()["error"]["message"]


def test_a_toolset_limited_to_other_groups_is_403_with_the_reason(user: Any) -> None:
    from django.contrib.auth.models import Group

    staff = Group.objects.create(name="staff")
    ToolsetConfig.objects.create(toolset_id="probe").groups.add(staff)
    token = token_for(user)

    response = post(Client(), url("probe", "echo"), {"params": {"text": "hi"}}, Authorization=f"Bearer {token}")
    assert response.status_code == 403
    assert response.json()["error"]["reason"] == "Not available to your groups"
    assert ToolExecution.objects.get().status == "error"  # refused, and the refusal audited

    user.groups.add(staff)
    response = post(Client(), url("probe", "echo"), {"params": {"text": "hi"}}, Authorization=f"Bearer {token}")
    assert response.status_code == 200 and response.json()["result"] == {"text": "hi"}
