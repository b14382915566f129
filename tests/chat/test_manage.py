from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from chat.models import Chat, Message, Turn

pytestmark = pytest.mark.django_db


@pytest.fixture
def owner(client: Client, user: Any) -> Client:
    client.force_login(user)
    return client


def test_export_downloads_are_attachments_for_the_owner_only(owner: Client, user: Any, other_user: Any) -> None:
    chat = Chat.objects.create(owner=user, title="Trip")
    Message.objects.create(chat=chat, role="user", content="hello")
    md = owner.get(f"/chats/{chat.pk}/export.md")
    assert md.status_code == 200 and md["Content-Type"].startswith("text/markdown")
    assert md["Content-Disposition"] == f'attachment; filename="trip-{chat.pk}.md"'
    assert "## You\n\nhello" in md.content.decode()
    js = owner.get(f"/chats/{chat.pk}/export.json")
    assert js["Content-Disposition"] == f'attachment; filename="trip-{chat.pk}.json"'
    assert json.loads(js.content)["messages"] == [{"role": "user", "content": "hello"}]
    theirs = Chat.objects.create(owner=other_user, title="Secret")
    assert owner.get(f"/chats/{theirs.pk}/export.md").status_code == 404
    assert owner.get(f"/chats/{theirs.pk}/export.json").status_code == 404
    assert owner.get("/chats/99999999/export.json").status_code == 404


def test_manage_page_lists_only_own_chats_with_counts(owner: Client, user: Any, other_user: Any) -> None:
    chat = Chat.objects.create(owner=user, title="Mine")
    Message.objects.create(chat=chat, role="user", content="a")
    Message.objects.create(chat=chat, role="tool", content="b", tool_call_id="x")
    Chat.objects.create(owner=other_user, title="Not mine")
    html = owner.get("/chats/manage/").content.decode()
    assert "Mine" in html and "Not mine" not in html
    assert "<td>1</td>" in html


def test_delete_many_asks_first_then_deletes_only_own_chats(owner: Client, user: Any, other_user: Any) -> None:
    mine = [Chat.objects.create(owner=user, title=f"Chat {i}") for i in range(3)]
    theirs = Chat.objects.create(owner=other_user, title="Theirs")
    ids = [mine[0].pk, mine[1].pk, theirs.pk]
    confirm = owner.post("/chats/delete/", {"chats": ids})
    html = confirm.content.decode()
    assert confirm.status_code == 200 and "Delete 2 chats?" in html and "Theirs" not in html
    assert Chat.objects.count() == 4
    done = owner.post("/chats/delete/", {"chats": ids, "confirm": "yes"}, follow=True)
    assert "Deleted 2 chats." in done.content.decode()
    assert set(Chat.objects.values_list("pk", flat=True)) == {mine[2].pk, theirs.pk}


def test_delete_many_stops_running_answers(owner: Client, user: Any) -> None:
    from chat import live
    from core.redis_client import sync_client

    chat = Chat.objects.create(owner=user, title="Busy")
    turn = Turn.objects.create(chat=chat, status=Turn.Status.RUNNING)
    owner.post("/chats/delete/", {"chats": [chat.pk], "confirm": "yes"})
    assert not Chat.objects.filter(pk=chat.pk).exists()
    assert sync_client().exists(live.key(turn.pk, "cancel"))


@pytest.mark.parametrize("ids", [["x"], ["1.5"], ["-1"], ["١"], ["9" * 40]])
def test_delete_many_rejects_bad_ids(owner: Client, ids: list[str]) -> None:
    assert owner.post("/chats/delete/", {"chats": ids, "confirm": "yes"}).status_code == 400


def test_delete_many_with_nothing_selected_goes_back_with_a_message(owner: Client) -> None:
    response = owner.post("/chats/delete/", {"confirm": "yes"}, follow=True)
    assert "Select at least one chat to delete." in response.content.decode()


def test_delete_many_needs_post_and_csrf(user: Any) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    chat = Chat.objects.create(owner=user, title="Keep")
    assert client.get("/chats/delete/").status_code == 405
    assert client.post("/chats/delete/", {"chats": [chat.pk], "confirm": "yes"}).status_code == 403
    assert Chat.objects.filter(pk=chat.pk).exists()
