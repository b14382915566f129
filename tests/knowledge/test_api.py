"""The Knowledge tools through the execution API (the same executor /v1 and /mcp use): a token
searches only the bases its user may see, with their groups read at the call."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.test import Client

from hub.models import ApiToken

pytestmark = pytest.mark.django_db(transaction=True)

GUIDE = b"# Guide\n\n## Proxy\n\nThe proxy setting lives in Preferences, under Network."


def _search(user: Any, query: str) -> Any:
    token = ApiToken.issue(user, "test")[1]
    return Client().post(
        "/toolsets/knowledge/execute/search_knowledge",
        data=json.dumps({"tool_call_id": "k1", "params": {"query": query}}),
        content_type="application/json",
        headers={"Authorization": f"Bearer {token}"},
    )


def test_a_group_member_finds_the_shared_base_and_a_non_member_does_not(
    user: Any, other_user: Any, make_base: Any, add_document: Any
) -> None:
    team = Group.objects.create(name="Team")
    add_document(make_base(user, groups=[team]), "guide.md", GUIDE)

    outsider = _search(other_user, "proxy")
    # The tool's error, as the model would see it: no base, not a passage of someone else's.
    assert "no knowledge bases you can search" in outsider.json()["error"]["message"]
    assert "proxy setting" not in outsider.content.decode()

    other_user.groups.add(team)
    member = _search(other_user, "proxy")
    assert member.status_code == 200, member.content
    (passage,) = member.json()["result"]["passages"]
    assert passage["title"] == "guide.md" and passage["heading"] == "Guide › Proxy"
