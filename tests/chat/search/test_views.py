from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from chat.models import Chat, Message

pytestmark = pytest.mark.django_db

HX = {"HX-Request": "true"}


@pytest.fixture
def owner(client: Client, user: Any) -> Client:
    client.force_login(user)
    return client


def test_search_needs_sign_in(client: Client) -> None:
    response = client.get("/search/?q=x")
    assert response.status_code == 302 and "/login/" in response["Location"]


def test_fragment_lists_highlighted_matches_and_an_announcement(owner: Client, user: Any) -> None:
    chat = Chat.objects.create(owner=user, title="Kyoto <trip>")
    Message.objects.create(chat=chat, role="user", content="Temples & <b>gardens</b> of kyoto")
    response = owner.get("/search/?q=kyo", headers=HX)
    html = response.content.decode()
    assert response.status_code == 200
    assert f'href="/chats/{chat.pk}/"' in html
    assert "<mark>Kyo</mark>to &lt;trip&gt;" in html
    assert "Temples &amp; &lt;b&gt;gardens&lt;/b&gt; of <mark>kyo</mark>to" in html
    assert 'id="chat-search-status"' in html and "1 chat found." in html
    assert "<html" not in html


def test_no_match_says_so(owner: Client, user: Any) -> None:
    html = owner.get("/search/?q=%22nothing%22", headers=HX).content.decode()
    assert "No chats match “&quot;nothing&quot;”." in html
    assert "No chats found." in html


def test_without_htmx_the_results_are_a_page(owner: Client, user: Any) -> None:
    Chat.objects.create(owner=user, title="Kyoto")
    response = owner.get("/search/?q=kyoto")
    html = response.content.decode()
    assert response.status_code == 200 and "<html" in html and "<mark>Kyoto</mark>" in html


@pytest.mark.parametrize("q", ["%00", "%22%27%2A%28", "a" * 5000, "NEAR%28a%29", "%F0%9F%99%82", ""])
def test_hostile_queries_are_answered(owner: Client, q: str) -> None:
    assert owner.get(f"/search/?q={q}", headers=HX).status_code == 200
    assert owner.get(f"/search/?q={q}").status_code == 200


def test_search_is_get_only(owner: Client) -> None:
    assert owner.post("/search/", {"q": "x"}).status_code == 405
