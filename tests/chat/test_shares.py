"""Shared chats (chat/shares.py): a read-only snapshot link; who may open it; revoking; continuing
as one's own chat; model text stays inert on the shared page."""

from __future__ import annotations

import json
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


def _file(user: Any, chat: Chat, name: str, data: bytes, *, on: Message | None) -> Any:
    from django.core.files.base import ContentFile

    from toolsets.files.models import Attachment

    attachment = Attachment(owner=user, chat=chat, name=name, size=len(data), kind="csv", content_type="text/csv")
    attachment.file.save("f.csv", ContentFile(data), save=False)
    attachment.save()
    if on is not None:
        attachment.messages.add(on)
    return attachment


def _download(client: Client, link: ChatShare, attachment: Any) -> Any:
    return client.get(reverse("chat:shared_file", args=[link.token, attachment.pk]))


def test_shared_files_download_through_the_share_only_when_ticked(
    user: Any, other_user: Any, chat: Chat, demo_model: LLMModel
) -> None:
    """The download is checked against the share, not the owner: another user gets the shared
    question's file through a ticked share, and nothing else of the owner's."""
    question = Message.objects.get(content="First question")
    shared = _file(user, chat, "figures.csv", b"a,b\n1,2\n", on=question)
    # The owner's other files: one not sent, one sent in another chat, one a later question carries.
    loose = _file(user, chat, "loose.csv", b"secret", on=None)
    elsewhere_chat = Chat.objects.create(owner=user, model=demo_model)
    elsewhere_turn = Turn.objects.create(chat=elsewhere_chat, status=Turn.Status.COMPLETED)
    elsewhere = _file(
        user,
        elsewhere_chat,
        "elsewhere.csv",
        b"secret",
        on=Message.objects.create(chat=elsewhere_chat, turn=elsewhere_turn, role="user", content="q"),
    )
    owner = signed_in(user)
    without = share(owner, chat)
    ticked = share(owner, chat, include_files="on")
    later_turn = Turn.objects.create(chat=chat, status=Turn.Status.COMPLETED)
    later = _file(
        user,
        chat,
        "later.csv",
        b"secret",
        on=Message.objects.create(chat=chat, turn=later_turn, role="user", content="q"),
    )
    other = signed_in(other_user)

    page = other.get(shared_url(ticked)).content.decode()
    assert reverse("chat:shared_file", args=[ticked.token, shared.pk]) in page
    response = _download(other, ticked, shared)
    assert response.status_code == 200 and b"".join(response.streaming_content) == b"a,b\n1,2\n"
    assert 'attachment; filename="figures.csv"' in response["Content-Disposition"]
    assert response["X-Content-Type-Options"] == "nosniff" and "sandbox" in response["Content-Security-Policy"]
    # Not ticked: the same file is a 404, and the page does not list it.
    assert _download(other, without, shared).status_code == 404
    assert "figures.csv" not in other.get(shared_url(without)).content.decode()
    # Never the owner's other files, whatever id is asked for.
    for not_shared in (loose, elsewhere, later):
        assert _download(other, ticked, not_shared).status_code == 404
    assert other.get(f"/s/{ticked.token}/files/{10**17}/").status_code == 404
    # The owner's own file page stays the owner's.
    assert other.get(reverse("files:download", args=[shared.pk])).status_code == 404
    # Revoked: gone.
    owner.post(reverse("chat:share_revoke", args=[ticked.pk]))
    assert _download(other, ticked, shared).status_code == 404


def test_anonymous_downloads_follow_the_links_visibility(user: Any, chat: Chat) -> None:
    shared = _file(user, chat, "figures.csv", b"1,2", on=Message.objects.get(content="First question"))
    owner = signed_in(user)
    private = share(owner, chat, include_files="on")
    response = _download(Client(), private, shared)
    assert response.status_code == 302 and response["Location"].startswith("/login/")

    app = AppSettings.load()
    app.public_shares = True
    app.save()
    public = share(owner, chat, public="on", include_files="on")
    assert _download(Client(), public, shared).status_code == 200
    app.public_shares = False
    app.save()
    assert _download(Client(), public, shared).status_code == 302


@pytest.mark.django_db(transaction=True)
def test_a_continued_copy_keeps_delegation_cards_and_components(user: Any, other_user: Any, demo_model: Any) -> None:
    """A real delegated turn (the demo model hands the week plan to the Workspace assistant,
    whose answer has components): the copy's page shows the same delegation card, with the
    subagent's nested cards and the same components, under the copy's own ids."""
    import asyncio

    from chat.worker.turns import run_turn
    from toolsets.workspace.sample_data import seed_for_user

    seed_for_user(user)
    demo_model.extra_params = {"tokens_per_second": 0}
    demo_model.save()
    selection = {"workspace": ["list_events", "list_tasks"], "agents": ["workspace_assistant"]}
    original = Chat.objects.create(owner=user, model=demo_model, enabled_tools=selection, title="Week")
    turn = Turn.objects.create(chat=original, model=demo_model)
    Message.objects.create(chat=original, turn=turn, role="user", content="Plan my week from my calendar and tasks")
    asyncio.run(asyncio.wait_for(run_turn(turn.pk), 60))
    turn.refresh_from_db()
    assert turn.status == Turn.Status.COMPLETED, turn.error
    link = share(signed_in(user), original)
    other = signed_in(other_user)

    other.post(reverse("chat:share_continue", args=[link.token]))

    copy = Chat.objects.get(owner=other_user)
    copied = copy.turns.get()
    before = signed_in(user).get(reverse("chat:detail", args=[original.pk])).content.decode()
    after = other.get(reverse("chat:detail", args=[copy.pk])).content.decode()

    def cards(html: str, turn_id: int) -> list[str]:
        # The page's cards and components, with the turn's own id taken out of their DOM ids.
        found = re.findall(r'data-(?:testid="(delegation)"|component="(\w+)")|id="((?:card|steps)-[\w-]+)"', html)
        return [
            kind or component or re.sub(rf"^(card|steps)-{turn_id}\b", r"\1-T", dom_id)
            for kind, component, dom_id in found
        ]

    shown = cards(before, turn.pk)
    assert "delegation" in shown and {"task_table", "calendar_events"} <= set(shown), shown
    assert cards(after, copied.pk) == shown
    assert f'id="steps-{copied.pk}-0-0"' in after
    # The subagent's work is the copy's: its transcript, its records, owned by the new owner.
    assert (
        Message.objects.filter(turn=copied, lane="0-0").count() == Message.objects.filter(turn=turn, lane="0-0").count()
    )
    assert set(ToolExecution.objects.filter(turn=copied).values_list("user_id", flat=True)) == {other_user.pk}
    assert ToolExecution.objects.filter(turn=copied, lane="0-0").count() == 2


def test_a_continued_copy_carries_only_what_the_share_page_shows_of_tool_results(
    user: Any, other_user: Any, chat: Chat
) -> None:
    """A long result is cut on the card, a block meant for the model only is not on it, and a
    read_tool_result's answer shows one line: the copy (its records and the model's transcript)
    holds no more than that."""
    first = Turn.objects.filter(chat=chat).order_by("id").first()
    assert first is not None
    long_text = "visible start " + "x" * 30_000 + " HIDDEN-TAIL"
    calls = [
        {"id": f"c{n}", "type": "function", "function": {"name": name, "arguments": "{}"}}
        for n, name in enumerate(["toolset__web__fetch", "toolset__mcp_demo__lookup", "read_tool_result"])
    ]
    Message.objects.filter(turn=first, role="assistant").update(tool_calls=calls)
    content = {
        "content": [
            {"type": "text", "text": "for the person"},
            {"type": "text", "text": "MODEL-ONLY note", "audience": "assistant"},
        ]
    }
    for position, result in enumerate([{"text": long_text}, content]):
        ToolExecution.objects.create(
            user=user,
            turn=first,
            step=0,
            position=position,
            tool_call_id=f"c{position}",
            toolset="web",
            tool="fetch",
            status="success",
            result=result,
            raw_arguments='{"secret_hint": "RAW-ONLY"}',
        )
    model_saw = {"c0": long_text, "c1": "for the person\nMODEL-ONLY note", "c2": "Part 2 of 3\nMORE HIDDEN-TAIL"}
    for call_id, text in model_saw.items():
        Message.objects.create(chat=chat, turn=first, role="tool", step=0, tool_call_id=call_id, content=text)
    link = share(signed_in(user), chat)
    other = signed_in(other_user)
    page = other.get(shared_url(link)).content.decode()
    assert "visible start" in page and "for the person" in page
    assert "HIDDEN-TAIL" not in page and "MODEL-ONLY" not in page and "RAW-ONLY" not in page

    other.post(reverse("chat:share_continue", args=[link.token]))

    copy = Chat.objects.get(owner=other_user)
    records = ToolExecution.objects.filter(turn__chat=copy).order_by("position")
    transcript = list(Message.objects.filter(chat=copy, role="tool").order_by("id").values_list("content", flat=True))
    stored = json.dumps([list(records.values("result", "raw_arguments")), transcript])
    assert "HIDDEN-TAIL" not in stored and "MODEL-ONLY" not in stored and "RAW-ONLY" not in stored
    assert "visible start" in transcript[0] and transcript[1] == "for the person" and transcript[2] == "Part 2 of 3"
    assert records[1].result == {"content": [{"type": "text", "text": "for the person"}]}
    # The copy's page shows the same cards as the share.
    mine = other.get(reverse("chat:detail", args=[copy.pk])).content.decode()
    assert "visible start" in mine and "for the person" in mine and "Long result: only the beginning" in mine
