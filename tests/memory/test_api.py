"""The Memory tools through the execution API (the executor /v1 and /mcp use too): a token
reaches its own user's memories and nobody else's."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from hub.models import ApiToken
from memory import store

pytestmark = pytest.mark.django_db(transaction=True)


def _call(user: Any, tool: str, params: dict[str, Any]) -> Any:
    token = ApiToken.issue(user, "test")[1]
    return Client().post(
        f"/toolsets/memory/execute/{tool}",
        data=json.dumps({"tool_call_id": "m1", "params": params}),
        content_type="application/json",
        headers={"Authorization": f"Bearer {token}"},
    )


def test_a_token_lists_saves_and_forgets_only_its_users_memories(user: Any, other_user: Any) -> None:
    mine, _ = store.save(user.pk, "Has a dog called Rex")

    listed = _call(other_user, "list_memories", {})
    assert listed.status_code == 200 and listed.json()["result"]["count"] == 0
    refused = _call(other_user, "forget_memory", {"memory_id": mine.pk})
    assert "No memory" in refused.json()["error"]["message"]
    assert store.listing(user.pk)[0].text == "Has a dog called Rex"

    saved = _call(other_user, "save_memory", {"text": "Likes tea"})
    assert saved.status_code == 200, saved.content
    assert [m.text for m in store.listing(other_user.pk)] == ["Likes tea"]
    assert [m.text for m in store.listing(user.pk)] == ["Has a dog called Rex"]
    own = _call(user, "list_memories", {}).json()["result"]
    assert [m["text"] for m in own["memories"]] == ["Has a dog called Rex"]
