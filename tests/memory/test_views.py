"""The account page's Memory section: the user's own memories only, every input checked."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from memory import store
from memory.models import Memory

pytestmark = pytest.mark.django_db


def _client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_the_account_page_lists_edits_deletes_and_adds(user: Any) -> None:
    memory, _ = store.save(user.pk, "Prefers <b>answers</b> in German")
    client = _client(user)

    page = client.get(reverse("accounts:account")).content.decode()
    assert "Prefers &lt;b&gt;answers&lt;/b&gt; in German" in page and 'id="memories"' in page

    edited = client.post(reverse("memory:edit", args=[memory.pk]), {"text": "Prefers answers in French"})
    assert edited.status_code == 200 and "Prefers answers in French" in edited.content.decode()
    assert client.post(reverse("memory:edit", args=[memory.pk]), {"text": " "}).status_code == 400
    assert client.post(reverse("memory:add"), {"text": "Lives in Lyon"}).status_code == 200
    assert client.post(reverse("memory:add"), {"text": "x" * 600}).status_code == 400
    assert client.post(reverse("memory:delete", args=[memory.pk])).status_code == 200
    assert list(Memory.objects.values_list("text", flat=True)) == ["Lives in Lyon"]


def test_another_users_memory_is_a_404(user: Any, other_user: Any) -> None:
    memory, _ = store.save(user.pk, "Has a dog called Rex")
    intruder = _client(other_user)

    assert intruder.post(reverse("memory:edit", args=[memory.pk]), {"text": "No dog"}).status_code == 404
    assert intruder.post(reverse("memory:delete", args=[memory.pk])).status_code == 404
    assert "Rex" not in intruder.get(reverse("accounts:account")).content.decode()
    assert "Rex" not in intruder.get(reverse("memory:export", args=["json"])).content.decode()
    assert Memory.objects.get(pk=memory.pk).text == "Has a dog called Rex"
    assert intruder.get(reverse("memory:export", args=["exe"])).status_code == 404
    assert Client().get(reverse("memory:export", args=["json"])).status_code == 302  # signed out


def test_exports_as_json_and_markdown(user: Any) -> None:
    store.save(user.pk, "Uses *emphasis* and [links](javascript:x)")
    client = _client(user)

    as_json = client.get(reverse("memory:export", args=["json"]))
    as_md = client.get(reverse("memory:export", args=["md"]))

    assert json.loads(as_json.content)["memories"][0]["text"] == "Uses *emphasis* and [links](javascript:x)"
    assert "attachment" in as_json["Content-Disposition"] and as_json["Content-Type"].startswith("application/json")
    assert "\\*emphasis\\* and \\[links\\]\\(javascript:x\\)" in as_md.content.decode()


def test_switching_memory_off_and_on(user: Any) -> None:
    client = _client(user)

    off = client.post(reverse("memory:switch"), {"enabled": "0"})
    assert 'data-testid="memory-off"' in off.content.decode() and not store.is_enabled(user.pk)
    assert client.post(reverse("memory:add"), {"text": "Lives in Lyon"}).status_code == 400
    client.post(reverse("memory:switch"), {"enabled": ["0", "1"]})
    assert store.is_enabled(user.pk)
    assert client.get(reverse("memory:switch")).status_code == 405
