"""Shared chats (chat/shares.py): a read-only snapshot link; who may open it; revoking; continuing
as one's own chat; model text stays inert on the shared page."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from chat.models import AppSettings, Chat, ChatShare, LLMModel, Message, Turn
from toolsets.models import ToolExecution

pytestmark = pytest.mark.django_db

XSS = '<script>alert("x")</script><img src=x onerror="alert(1)"><a href="javascript:alert(2)">link</a>'


@pytest.fixture
def chat(user: Any, demo_model: LLMModel) -> Chat:
    chat = Chat.objects.create(owner=user, model=demo_model, title="Trip plan")
    for question, answer in [("First question", "First answer " + XSS), ("Second question", "Second **answer**")]:
        turn = Turn.objects.create(chat=chat, model=demo_model, status=Turn.Status.COMPLETED)
        Message.objects.create(chat=chat, turn=turn, role="user", content=question)
        Message.objects.create(chat=chat, turn=turn, role="assistant", content=answer, step=0)
    return chat


def signed_in(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def share(owner: Client, chat: Chat, **fields: str) -> ChatShare:
    response = owner.post(reverse("chat:share", args=[chat.pk]), fields)
    assert response.status_code == 302, response.content
    return ChatShare.objects.filter(chat=chat).latest("created_at")


def shared_url(share: ChatShare) -> str:
    return reverse("chat:shared", args=[share.token])


def test_the_owner_shares_a_snapshot_of_the_branch_on_screen(user: Any, chat: Chat) -> None:
    owner = signed_in(user)
    link = share(owner, chat)
    assert len(link.token) >= 32 and link.title == "Trip plan" and not link.public
    # A later message is not in the snapshot.
    Message.objects.create(chat=chat, turn=Turn.objects.create(chat=chat), role="user", content="Later question")

    html = owner.get(shared_url(link)).content.decode()
    assert "First question" in html and "Second <strong>answer</strong>" in html
    assert "Later question" not in html
    assert "read-only snapshot" in html
    # No controls and no websocket: nothing to send, edit, regenerate or connect.
    for control in ("ws-connect", "composer", "chat:regenerate", 'data-testid="edit-question"', "regenerate"):
        assert control not in html
    assert "hx-disable" in html


def test_another_signed_in_user_may_open_it_and_continue_it_as_their_own(
    user: Any, other_user: Any, chat: Chat
) -> None:
    first = Turn.objects.filter(chat=chat).order_by("id").first()
    ToolExecution.objects.create(user=user, turn=first, step=0, position=0, toolset="clock_math", tool="calculate")
    link = share(signed_in(user), chat)
    other = signed_in(other_user)
    assert other.get(shared_url(link)).status_code == 200

    response = other.post(reverse("chat:share_continue", args=[link.token]))

    copy = Chat.objects.get(owner=other_user)
    assert response.status_code == 302 and response["Location"] == reverse("chat:detail", args=[copy.pk])
    assert copy.title == "Trip plan"
    assert list(Message.objects.filter(chat=copy).order_by("id").values_list("role", "content"))[:2] == [
        ("user", "First question"),
        ("assistant", "First answer " + XSS),
    ]
    turns = list(copy.turns.order_by("id"))
    assert len(turns) == 2 and turns[1].parent_id == turns[0].pk
    assert ToolExecution.objects.get(turn=turns[0]).user == other_user
    page = other.get(reverse("chat:detail", args=[copy.pk])).content.decode()
    assert "Second <strong>answer</strong>" in page
    # The original is untouched, and still not the other user's to open.
    assert Message.objects.filter(chat=chat).count() == 4
    assert other.get(reverse("chat:detail", args=[chat.pk])).status_code == 404


def test_anonymous_visitors_are_sent_to_sign_in_unless_public_links_are_allowed(user: Any, chat: Chat) -> None:
    owner = signed_in(user)
    private = share(owner, chat)
    # Asking for public while the admin does not allow it gives a signed-in-only link.
    refused_public = share(owner, chat, public="on")
    assert not refused_public.public
    for link in (private, refused_public):
        response = Client().get(shared_url(link))
        assert response.status_code == 302 and response["Location"].startswith("/login/")

    app = AppSettings.load()
    app.public_shares = True
    app.save()
    public = share(owner, chat, public="on")
    assert public.public
    response = Client().get(shared_url(public))
    assert response.status_code == 200 and "First question" in response.content.decode()
    assert response["X-Robots-Tag"] == "noindex"
    assert Client().get(shared_url(private)).status_code == 302

    # The admin turns public links off again: existing public links stop working for anonymous.
    app.public_shares = False
    app.save()
    assert Client().get(shared_url(public)).status_code == 302
    # Anonymous visitors cannot continue a chat.
    assert Client().post(reverse("chat:share_continue", args=[public.token])).status_code == 302
    assert not Chat.objects.exclude(pk=chat.pk).exists()


def test_a_revoked_link_is_gone_for_everyone(user: Any, other_user: Any, chat: Chat) -> None:
    owner = signed_in(user)
    link = share(owner, chat)
    account = owner.get(reverse("accounts:account")).content.decode()
    assert link.token in account

    assert owner.post(reverse("chat:share_revoke", args=[link.pk]), {"next": "account"}).status_code == 302
    link.refresh_from_db()
    assert link.revoked_at is not None
    assert owner.get(shared_url(link)).status_code == 404
    assert signed_in(other_user).get(shared_url(link)).status_code == 404
    assert signed_in(other_user).post(reverse("chat:share_continue", args=[link.token])).status_code == 404
    assert link.token not in owner.get(reverse("accounts:account")).content.decode()


def test_only_the_owner_shares_or_revokes(user: Any, other_user: Any, chat: Chat) -> None:
    link = share(signed_in(user), chat)
    other = signed_in(other_user)
    assert other.post(reverse("chat:share", args=[chat.pk])).status_code == 404
    assert other.get(reverse("chat:share", args=[chat.pk])).status_code == 404
    assert other.post(reverse("chat:share_revoke", args=[link.pk])).status_code == 404
    link.refresh_from_db()
    assert link.revoked_at is None


@pytest.mark.parametrize("token", ["x", "a" * 65, "not-a-real-token-but-long-enough", "../../etc/passwd"])
def test_unknown_tokens_are_404(user: Any, token: str) -> None:
    assert signed_in(user).get(f"/s/{token}/").status_code == 404


def test_an_empty_chat_cannot_be_shared(user: Any, demo_model: LLMModel) -> None:
    empty = Chat.objects.create(owner=user, model=demo_model)
    response = signed_in(user).post(reverse("chat:share", args=[empty.pk]))
    assert response.status_code == 400 and "nothing to share" in response.content.decode()
    assert not ChatShare.objects.exists()


def test_model_text_stays_inert_on_the_shared_page(user: Any, chat: Chat) -> None:
    Message.objects.filter(role="user", content="Second question").update(content=XSS)
    app = AppSettings.load()
    app.public_shares = True
    app.save()
    link = share(signed_in(user), chat, public="on")
    html = Client().get(shared_url(link)).content.decode()
    body = html.split('data-testid="shared-messages"', 1)[1]
    assert "<script>alert" not in body
    assert not re.search(r"<img[^>]*onerror", body)
    assert 'href="javascript:' not in body
    assert "&lt;script&gt;" in body  # the question, shown as text


def test_files_are_listed_only_when_the_sharer_ticks_it(user: Any, chat: Chat) -> None:
    from django.core.files.base import ContentFile

    from toolsets.files.models import Attachment

    question = Message.objects.get(content="First question")
    attachment = Attachment(
        owner=user, chat=chat, name="budget-secret.csv", size=12, kind="csv", content_type="text/csv"
    )
    attachment.file.save("budget.csv", ContentFile(b"a,b\n1,2\n"), save=False)
    attachment.save()
    attachment.messages.add(question)
    owner = signed_in(user)

    assert "budget-secret.csv" not in owner.get(shared_url(share(owner, chat))).content.decode()
    with_files = owner.get(shared_url(share(owner, chat, include_files="on"))).content.decode()
    assert "budget-secret.csv" in with_files


def test_tool_cards_and_citations_show_read_only_with_hostile_sources_inert(user: Any, chat: Chat) -> None:
    """A tool result's sources come from outside (a fetched page): on the shared page they are
    text and a checked link, like in the chat."""
    first = Turn.objects.filter(chat=chat).order_by("id").first()
    ToolExecution.objects.create(
        user=user,
        turn=first,
        step=0,
        position=0,
        toolset="web",
        tool="fetch",
        status="success",
        result={"text": "ok"},
        sources=[
            {"n": 1, "title": "Good page", "url": "https://example.com/a", "kind": "example.com", "snippet": "s"},
            {"n": 2, "title": "<img src=x onerror=alert(1)>", "url": "javascript:alert(1)", "kind": "x", "snippet": ""},
        ],
    )
    Message.objects.filter(turn=first, role="assistant").update(content="See [1] and [2].")
    html = signed_in(user).get(shared_url(share(signed_in(user), chat))).content.decode()
    body = html.split('data-testid="shared-messages"', 1)[1]
    assert body.count('data-testid="source"') == 2
    assert 'href="https://example.com/a"' in body
    assert 'href="javascript:' not in body and "<img src=x" not in body
    assert 'class="tool-card' in body and "<button" not in body and "<form" not in body
