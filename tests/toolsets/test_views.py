"""/toolsets/: a user's own, stricter tool policies."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from toolsets.models import ToolRule, UserToolPolicy

pytestmark = pytest.mark.django_db(transaction=True)


def logged_in(user: Any, *, csrf: bool = False) -> Client:
    client = Client(enforce_csrf_checks=csrf)
    client.force_login(user)
    return client


def test_settings_page_shows_each_tools_policy(user: Any) -> None:
    html = logged_in(user).get("/toolsets/").content.decode()
    assert 'id="policy-workspace-create_task"' in html
    # An Ask tool offers Ask and Never, not Run: a user cannot loosen it.
    start = html.index('id="policy-workspace-create_task"')
    options = html[start : html.index("</select>", start)]
    assert "Ask me first" in options and "Never use it" in options and "Run it" not in options


def test_a_user_may_make_a_tool_stricter(user: Any) -> None:
    client = logged_in(user)
    response = client.post("/toolsets/clock_math/policy/", {"tool": "calculate", "policy": "ask"})
    assert response.status_code == 200 and "Calculate: Ask" in response.content.decode()
    assert UserToolPolicy.objects.get(user=user).policy == "ask"
    client.post("/toolsets/clock_math/policy/", {"tool": "calculate", "policy": "deny"})
    assert UserToolPolicy.objects.get(user=user).policy == "deny"
    # Back to the administrator's policy: the user's own choice is gone.
    client.post("/toolsets/clock_math/policy/", {"tool": "calculate", "policy": "auto"})
    assert not UserToolPolicy.objects.exists()


def test_a_user_cannot_loosen_a_tool(user: Any) -> None:
    client = logged_in(user)
    response = client.post("/toolsets/workspace/policy/", {"tool": "create_task", "policy": "auto"})
    assert response.status_code == 400 and "never looser" in response.content.decode()
    ToolRule.objects.create(toolset_id="clock_math", tool="calculate", policy="deny")
    response = client.post("/toolsets/clock_math/policy/", {"tool": "calculate", "policy": "ask"})
    assert response.status_code == 400
    assert not UserToolPolicy.objects.exists()


@pytest.mark.parametrize(
    "data",
    [{"tool": "nope", "policy": "ask"}, {"policy": "ask"}, {"tool": "calculate", "policy": "sometimes"}, {}],
)
def test_bad_policy_posts_are_4xx(user: Any, data: dict[str, str]) -> None:
    response = logged_in(user).post("/toolsets/clock_math/policy/", data)
    assert 400 <= response.status_code < 500
    assert logged_in(user).post("/toolsets/nope/policy/", data).status_code == 404


def test_the_settings_page_says_a_toolset_is_not_available_to_my_groups(user: Any) -> None:
    from django.contrib.auth.models import Group

    from toolsets.models import ToolsetConfig

    staff = Group.objects.create(name="staff")
    ToolsetConfig.objects.create(toolset_id="clock_math").groups.add(staff)
    card = _card(logged_in(user).get("/toolsets/").content.decode(), "clock_math")
    assert "Not available to your groups" in card

    user.groups.add(staff)
    assert "Not available to your groups" not in _card(logged_in(user).get("/toolsets/").content.decode(), "clock_math")


def _card(html: str, toolset_id: str) -> str:
    return html.split(f'data-testid="toolset-card-{toolset_id}"', 1)[1].split("</article>", 1)[0]


def test_a_toolset_limited_to_other_groups_has_no_controls_on_the_settings_page(user: Any) -> None:
    from django.contrib.auth.models import Group

    from toolsets.models import ToolsetConfig

    ToolsetConfig.objects.create(toolset_id="clock_math").groups.add(Group.objects.create(name="staff"))
    card = _card(logged_in(user).get("/toolsets/").content.decode(), "clock_math")
    assert 'name="enabled"' not in card and "available to some groups only" in card
