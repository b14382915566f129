from __future__ import annotations

from itertools import pairwise
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client
from django.urls import reverse

from chat import live
from chat.models import Chat, LLMModel, Message, Turn

pytestmark = pytest.mark.django_db

POST_VIEWS = ["chat:send", "chat:stop", "chat:rename", "chat:delete", "chat:settings", "chat:tools"]


@pytest.fixture
def chat(user: Any, demo_model: LLMModel) -> Chat:
    return Chat.objects.create(owner=user, model=demo_model)


@pytest.fixture
def owner(client: Client, user: Any) -> Client:
    client.force_login(user)
    return client


def _url(name: str, chat: Chat) -> str:
    return reverse(name, args=[chat.pk])


# --- authentication and ownership ----------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "name", "with_chat"),
    [
        ("get", "chat:home", False),
        ("post", "chat:create", False),
        ("get", "chat:detail", True),
        *[("post", name, True) for name in POST_VIEWS],
    ],
)
def test_anonymous_user_is_sent_to_login(client: Client, chat: Chat, method: str, name: str, with_chat: bool) -> None:
    url = reverse(name, args=[chat.pk] if with_chat else [])

    response = client.get(url) if method == "get" else client.post(url, {"content": "hi", "title": "x"})

    assert response.status_code == 302
    assert response["Location"] == f"{reverse('login')}?next={url}"
    assert not Message.objects.exists()
    assert Chat.objects.filter(pk=chat.pk, title="").exists()


def test_another_users_chat_page_is_not_found(client: Client, other_user: Any, chat: Chat) -> None:
    client.force_login(other_user)

    assert client.get(_url("chat:detail", chat)).status_code == 404


@pytest.mark.parametrize("name", POST_VIEWS)
def test_another_user_cannot_act_on_a_chat(
    client: Client, other_user: Any, chat: Chat, demo_model: LLMModel, name: str
) -> None:
    turn = Turn.objects.create(chat=chat, model=demo_model)
    client.force_login(other_user)

    response = client.post(_url(name, chat), {"content": "hi", "title": "Mine now", "model": demo_model.pk})

    assert response.status_code == 404
    chat.refresh_from_db()
    assert chat.title == ""
    assert not Message.objects.exists()
    assert Turn.objects.get(pk=turn.pk).status == Turn.Status.QUEUED


def test_the_sidebar_lists_only_my_chats(owner: Client, other_user: Any, chat: Chat) -> None:
    chat.title = "My chat"
    chat.save()
    Chat.objects.create(owner=other_user, title="Mallory's secret plans")

    content = owner.get(reverse("chat:home")).content.decode()

    assert "My chat" in content
    assert "secret plans" not in content


# --- sending -------------------------------------------------------------------------------


def test_send_creates_a_user_message_and_a_queued_turn(
    owner: Client, chat: Chat, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks() as callbacks:
        response = owner.post(_url("chat:send", chat), {"content": "  What time is it in Tokyo?  "})

    assert response.status_code == 200
    message = Message.objects.get(chat=chat)
    assert message.role == Message.Role.USER
    assert message.content == "What time is it in Tokyo?"
    turn = Turn.objects.get(chat=chat)
    assert message.turn == turn
    assert turn.status == Turn.Status.QUEUED
    assert turn.model == chat.model
    # The worker is asked to run the turn once the transaction commits.
    assert len(callbacks) == 1
    html = response.content.decode()
    assert "What time is it in Tokyo?" in html
    assert f'id="turn-{turn.pk}"' in html


def test_first_message_sets_the_title(owner: Client, chat: Chat) -> None:
    response = owner.post(_url("chat:send", chat), {"content": "Plan a\n\ntrip   to Kyoto"})

    chat.refresh_from_db()
    assert chat.title == "Plan a trip to Kyoto"
    # The sidebar link is updated out of band.
    assert f'id="chat-link-{chat.pk}"' in response.content.decode()


def test_long_first_message_is_truncated_for_the_title(owner: Client, chat: Chat) -> None:
    owner.post(_url("chat:send", chat), {"content": "word " * 30})

    chat.refresh_from_db()
    assert len(chat.title) <= 60
    assert chat.title.endswith("…")
    assert chat.title.startswith("word word")


def test_a_sixty_character_message_is_the_title_as_is(owner: Client, chat: Chat) -> None:
    owner.post(_url("chat:send", chat), {"content": "x" * 60})

    chat.refresh_from_db()
    assert chat.title == "x" * 60


def test_later_messages_keep_the_title(owner: Client, chat: Chat) -> None:
    chat.title = "Kept"
    chat.save()

    response = owner.post(_url("chat:send", chat), {"content": "Another question"})

    chat.refresh_from_db()
    assert chat.title == "Kept"
    assert "chat-link-" not in response.content.decode()


@pytest.mark.parametrize("content", ["", "   \n\t "])
def test_empty_message_is_rejected(owner: Client, chat: Chat, content: str) -> None:
    response = owner.post(_url("chat:send", chat), {"content": content})

    assert response.status_code == 400
    assert not Turn.objects.exists()
    assert not Message.objects.exists()


@pytest.mark.parametrize("status", [Turn.Status.QUEUED, Turn.Status.RUNNING])
def test_sending_while_a_turn_is_active_queues_the_message(owner: Client, chat: Chat, status: str) -> None:
    from chat.models import PendingMessage

    Turn.objects.create(chat=chat, status=status)

    response = owner.post(_url("chat:send", chat), {"content": "Hello again"})

    # Queued to run when the answer ends (chat/pending.py), not part of the conversation yet.
    assert response.status_code == 200
    assert Turn.objects.count() == 1
    assert not Message.objects.exists()
    assert PendingMessage.objects.get(chat=chat).content == "Hello again"


def test_sending_after_a_finished_turn_is_allowed(owner: Client, chat: Chat) -> None:
    Turn.objects.create(chat=chat, status=Turn.Status.COMPLETED)

    assert owner.post(_url("chat:send", chat), {"content": "Next"}).status_code == 200
    assert Turn.objects.filter(status=Turn.Status.QUEUED).count() == 1


def test_send_requires_post(owner: Client, chat: Chat) -> None:
    assert owner.get(_url("chat:send", chat)).status_code == 405


def test_create_chat_with_a_first_message_starts_a_turn(owner: Client, user: Any, demo_model: LLMModel) -> None:
    response = owner.post(reverse("chat:create"), {"content": "Hello"}, headers={"HX-Request": "true"})

    chat = Chat.objects.get(owner=user)
    assert response["HX-Redirect"] == _url("chat:detail", chat)
    assert chat.title == "Hello"
    assert chat.model == demo_model
    assert Turn.objects.get(chat=chat).status == Turn.Status.QUEUED


# --- stop, rename, delete, model ------------------------------------------------------------


def test_stop_cancels_a_queued_turn(owner: Client, chat: Chat) -> None:
    turn = Turn.objects.create(chat=chat)

    response = owner.post(_url("chat:stop", chat))

    assert response.status_code == 204
    turn.refresh_from_db()
    assert turn.status == Turn.Status.CANCELLED


def test_stop_asks_the_worker_to_stop_a_running_turn(owner: Client, chat: Chat) -> None:
    turn = Turn.objects.create(chat=chat, status=Turn.Status.RUNNING)

    owner.post(_url("chat:stop", chat))

    turn.refresh_from_db()
    assert turn.status == Turn.Status.RUNNING  # the worker closes it
    assert live.sync_client().exists(live.key(turn.pk, "cancel"))


def test_stop_leaves_finished_turns_alone(owner: Client, chat: Chat) -> None:
    turn = Turn.objects.create(chat=chat, status=Turn.Status.COMPLETED)

    owner.post(_url("chat:stop", chat))

    turn.refresh_from_db()
    assert turn.status == Turn.Status.COMPLETED


def test_rename_sets_a_clean_title(owner: Client, chat: Chat) -> None:
    response = owner.post(_url("chat:rename", chat), {"title": "  Trip\n to   Kyoto "})

    assert response.status_code == 200
    chat.refresh_from_db()
    assert chat.title == "Trip to Kyoto"
    assert "Trip to Kyoto" in response.content.decode()


def test_rename_to_blank_keeps_the_title(owner: Client, chat: Chat) -> None:
    chat.title = "Original"
    chat.save()

    owner.post(_url("chat:rename", chat), {"title": "   "})

    chat.refresh_from_db()
    assert chat.title == "Original"


def test_delete_removes_the_chat_and_its_messages(owner: Client, chat: Chat) -> None:
    owner.post(_url("chat:send", chat), {"content": "Hello"})

    response = owner.post(_url("chat:delete", chat))

    assert response["HX-Redirect"] == reverse("chat:home")
    assert not Chat.objects.filter(pk=chat.pk).exists()
    assert not Message.objects.exists()
    assert not Turn.objects.exists()


def test_settings_switch_to_an_enabled_model(owner: Client, chat: Chat) -> None:
    other = LLMModel.objects.create(name="Other", model="openai/gpt-4o")

    response = owner.post(
        _url("chat:settings", chat), {"model": other.pk, "limit_tool_iterations": "on", "max_tool_iterations": "3"}
    )

    assert response.status_code == 200 and "Saved" in response.content.decode()
    chat.refresh_from_db()
    assert chat.model == other and chat.max_tool_iterations == 3 and chat.limit_tool_iterations


def test_settings_refuse_a_disabled_model_and_numbers_past_the_cap(
    owner: Client, chat: Chat, demo_model: LLMModel
) -> None:
    disabled = LLMModel.objects.create(name="Off", model="openai/gpt-4o", enabled=False)

    response = owner.post(_url("chat:settings", chat), {"model": disabled.pk, "max_tool_iterations": "999"})

    assert "Choose a number from 1 to 25." in response.content.decode()
    chat.refresh_from_db()
    assert chat.model == demo_model and chat.max_tool_iterations == 5
    assert not chat.limit_tool_iterations  # the switch was not sent: off


# --- the chat page ----------------------------------------------------------------------------


def test_chat_page_shows_the_conversation(owner: Client, chat: Chat) -> None:
    owner.post(_url("chat:send", chat), {"content": "What is 2 + 2?"})
    turn = Turn.objects.get(chat=chat)

    response = owner.get(_url("chat:detail", chat))

    assert response.status_code == 200
    html = response.content.decode()
    assert "What is 2 + 2?" in html
    assert f'id="turn-{turn.pk}"' in html


def test_chat_page_escapes_user_messages(owner: Client, chat: Chat) -> None:
    payload = "<script>alert(1)</script>"
    owner.post(_url("chat:send", chat), {"content": payload})

    html = owner.get(_url("chat:detail", chat)).content.decode()

    assert payload not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_send_response_escapes_the_message(owner: Client, chat: Chat) -> None:
    response = owner.post(_url("chat:send", chat), {"content": '<img src=x onerror="alert(1)">'})

    html = response.content.decode()
    assert "<img src=x" not in html
    assert "&lt;img" in html


# --- long chats: paging and stored HTML --------------------------------------------------------


def _long_chat(chat: Chat, turns: int, *, tool_calls: bool = False) -> list[Turn]:
    """`turns` finished exchanges, stored as the worker stores them (no HTML kept yet)."""
    from toolsets.models import ToolExecution

    made = Turn.objects.bulk_create([Turn(chat=chat, status=Turn.Status.COMPLETED) for _ in range(turns)])
    made = list(Turn.objects.filter(chat=chat).order_by("id"))
    for before, turn in pairwise(made):
        turn.parent = before  # one branch, each exchange after the one before
    Turn.objects.bulk_update(made, ["parent"])
    messages, executions = [], []
    for i, turn in enumerate(made):
        messages.append(Message(chat=chat, turn=turn, role="user", content=f"Question number {i}"))
        call = {"id": f"c{i}", "type": "function", "function": {"name": "clock_math__calculate", "arguments": "{}"}}
        messages.append(
            Message(
                chat=chat,
                turn=turn,
                step=0,
                role="assistant",
                content=f"Answer **number {i}**.\n\n- one\n- two",
                tool_calls=[call] if tool_calls else None,
            )
        )
        if tool_calls:
            executions.append(
                ToolExecution(
                    user=chat.owner, turn=turn, step=0, position=0, tool_call_id=f"c{i}",
                    toolset="clock_math", tool="calculate", status="success", result={"result": i},
                )
            )  # fmt: skip
    Message.objects.bulk_create(messages)
    ToolExecution.objects.bulk_create(executions)
    return made


def test_a_long_chat_shows_its_last_exchanges_and_a_way_to_earlier_ones(owner: Client, chat: Chat) -> None:
    from chat.exchanges import PAGE_TURNS

    turns = _long_chat(chat, PAGE_TURNS + 5)

    html = owner.get(_url("chat:detail", chat)).content.decode()

    assert f"Question number {PAGE_TURNS + 4}" in html
    assert "Question number 5<" in html
    assert "Question number 4<" not in html
    first_shown = turns[5]
    assert f"{reverse('chat:earlier', args=[chat.pk])}?before={first_shown.pk}" in html
    assert 'data-testid="load-earlier"' in html


def test_earlier_exchanges_come_a_page_at_a_time_until_the_first(owner: Client, chat: Chat) -> None:
    from chat.exchanges import PAGE_TURNS

    turns = _long_chat(chat, 2 * PAGE_TURNS + 3)
    url = reverse("chat:earlier", args=[chat.pk])

    middle = owner.get(f"{url}?before={turns[PAGE_TURNS + 3].pk}").content.decode()
    assert "Question number 3<" in middle and f"Question number {PAGE_TURNS + 2}<" in middle
    assert f"Question number {PAGE_TURNS + 3}<" not in middle
    assert f"?before={turns[3].pk}" in middle

    first = owner.get(f"{url}?before={turns[3].pk}").content.decode()
    assert "Question number 0<" in first and "Question number 2<" in first
    assert 'data-testid="load-earlier"' not in first


def test_a_short_chat_has_no_earlier_button(owner: Client, chat: Chat) -> None:
    _long_chat(chat, 3)

    assert 'data-testid="load-earlier"' not in owner.get(_url("chat:detail", chat)).content.decode()


def test_earlier_exchanges_of_another_users_chat_are_not_found(client: Client, other_user: Any, chat: Chat) -> None:
    turns = _long_chat(chat, 3)
    client.force_login(other_user)

    response = client.get(f"{reverse('chat:earlier', args=[chat.pk])}?before={turns[-1].pk}")

    assert response.status_code == 404


def test_earlier_without_a_turn_id_is_a_clear_error(owner: Client, chat: Chat) -> None:
    response = owner.get(f"{reverse('chat:earlier', args=[chat.pk])}?before=last")

    assert response.status_code == 400
    assert b"before" in response.content


def test_a_chat_page_renders_stored_markdown_once_and_keeps_it(
    owner: Client, chat: Chat, monkeypatch: pytest.MonkeyPatch
) -> None:
    from chat import rendering

    _long_chat(chat, 4)
    first = owner.get(_url("chat:detail", chat)).content.decode()
    assert "Answer <strong>number 3</strong>." in first
    stored = Message.objects.filter(chat=chat, role="assistant")
    assert all(m.html_key == rendering.fingerprint() and "<li>two</li>" in m.html for m in stored)

    def no_markdown(*_: Any, **__: Any) -> Any:
        raise AssertionError("Markdown was rendered again")

    monkeypatch.setattr(rendering, "render_block", no_markdown)
    again = owner.get(_url("chat:detail", chat)).content.decode()
    assert "Answer <strong>number 3</strong>." in again


def test_html_stored_by_another_renderer_is_rendered_again(owner: Client, chat: Chat) -> None:
    _long_chat(chat, 1)
    Message.objects.filter(chat=chat, role="assistant").update(html="<p>Old rendering</p>", html_key="0ld")

    html = owner.get(_url("chat:detail", chat)).content.decode()

    assert "Old rendering" not in html
    assert "Answer <strong>number 0</strong>." in html


def test_chat_page_queries_do_not_grow_with_the_chat(
    owner: Client, chat: Chat, django_assert_num_queries: Any, steady_mcp_snapshot: None
) -> None:
    _long_chat(chat, 80, tool_calls=True)
    owner.get(_url("chat:detail", chat))  # stores the rendered HTML

    # No question here has files: none is looked for (tests/toolsets/files: one query for all).
    # The owner's groups and whether a budget applies come with the chat's own query: the user,
    # the chat, its turns, their messages and tool calls, the models, the toolsets (the admin's,
    # the user's, the workspace's "has data") and the sidebar. Exactly: bench/run.py's target.
    with django_assert_num_queries(10):
        response = owner.get(_url("chat:detail", chat))

    from chat.exchanges import PAGE_TURNS

    assert response.content.decode().count('class="tool-card') >= PAGE_TURNS


# --- admin: API keys ----------------------------------------------------------------------------

API_KEY = "sk-proj-plaintext-secret-7f3a"


@pytest.fixture
def admin_client(client: Client) -> Client:
    admin = get_user_model().objects.create(username="root", is_staff=True, is_superuser=True)
    client.force_login(admin)
    return client


@pytest.fixture
def keyed_model() -> LLMModel:
    return LLMModel.objects.create(name="GPT", model="openai/gpt-4o", api_key=API_KEY)


def _admin_url(model: LLMModel) -> str:
    return reverse("admin:chat_llmmodel_change", args=[model.pk])


def _form_data(model: LLMModel, **overrides: Any) -> dict[str, Any]:
    return {
        "name": model.name,
        "model": model.model,
        "api_base": "",
        "api_key": "",
        "enabled": "on",
        "extra_params": "{}",
        "_save": "Save",
        **overrides,
    }


def _stored_ciphertext(model: LLMModel) -> str:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT api_key FROM {LLMModel._meta.db_table} WHERE id = %s", [model.pk])
        return str(cursor.fetchone()[0])


def test_admin_change_form_never_shows_the_api_key(admin_client: Client, keyed_model: LLMModel) -> None:
    response = admin_client.get(_admin_url(keyed_model))

    assert response.status_code == 200
    html = response.content.decode()
    assert API_KEY not in html
    assert _stored_ciphertext(keyed_model) not in html
    assert "••••7f3a" in html


def test_admin_list_shows_the_key_masked(admin_client: Client, keyed_model: LLMModel) -> None:
    html = admin_client.get(reverse("admin:chat_llmmodel_changelist")).content.decode()

    assert API_KEY not in html
    assert "••••7f3a" in html


def test_admin_blank_key_keeps_the_stored_key(admin_client: Client, keyed_model: LLMModel) -> None:
    response = admin_client.post(_admin_url(keyed_model), _form_data(keyed_model, name="GPT-4o"))

    assert response.status_code == 302
    keyed_model.refresh_from_db()
    assert keyed_model.name == "GPT-4o"
    assert keyed_model.api_key == API_KEY


def test_admin_new_key_replaces_the_stored_key(admin_client: Client, keyed_model: LLMModel) -> None:
    admin_client.post(_admin_url(keyed_model), _form_data(keyed_model, api_key="sk-new-key-0000"))

    keyed_model.refresh_from_db()
    assert keyed_model.api_key == "sk-new-key-0000"


def test_admin_clear_removes_the_stored_key(admin_client: Client, keyed_model: LLMModel) -> None:
    admin_client.post(_admin_url(keyed_model), _form_data(keyed_model, clear_api_key="on"))

    keyed_model.refresh_from_db()
    assert keyed_model.api_key == ""


# --- models limited to groups ---------------------------------------------------------------


@pytest.fixture
def staff_only() -> LLMModel:
    from django.contrib.auth.models import Group

    model = LLMModel.objects.create(name="Staff GPT", model="openai/staff")
    model.groups.add(Group.objects.create(name="staff"))
    return model


def _picker_ids(html: str) -> list[str]:
    import re

    select = html.split('id="sp-model"', 1)[1].split("</select>", 1)[0]
    return re.findall(r'<option value="(\d+)"', select)


def test_the_model_picker_offers_only_models_open_to_my_groups(
    owner: Client, user: Any, demo_model: LLMModel, staff_only: LLMModel
) -> None:
    assert _picker_ids(owner.get(reverse("chat:home")).content.decode()) == [str(demo_model.pk)]

    user.groups.add(staff_only.groups.get())
    assert _picker_ids(owner.get(reverse("chat:home")).content.decode()) == [str(demo_model.pk), str(staff_only.pk)]


def test_a_model_limited_to_other_groups_is_refused_by_every_form(
    owner: Client, user: Any, chat: Chat, demo_model: LLMModel, staff_only: LLMModel
) -> None:
    refused = "Choose one of the available models."

    created = owner.post(reverse("chat:create"), {"content": "Hi", "model": staff_only.pk})
    assert created.status_code == 400 and created.content.decode() == refused
    assert not Chat.objects.filter(title="Hi").exists()

    settings = owner.post(_url("chat:settings", chat), {"model": staff_only.pk})
    assert refused in settings.content.decode()
    chat.refresh_from_db()
    assert chat.model == demo_model

    owner.post(_url("chat:send", chat), {"content": "first"})
    turn = Turn.objects.get(chat=chat)
    turn.status = Turn.Status.COMPLETED
    turn.save()
    again = owner.post(reverse("chat:regenerate", args=[turn.pk]), {"model": staff_only.pk})
    assert again.status_code == 400 and again.content.decode() == refused

    user.groups.add(staff_only.groups.get())
    assert owner.post(reverse("chat:create"), {"content": "Hi", "model": staff_only.pk}).status_code == 302
    assert Chat.objects.get(title="Hi").model == staff_only


def test_a_chat_whose_model_i_lost_says_so_and_falls_back(
    owner: Client, user: Any, demo_model: LLMModel, staff_only: LLMModel
) -> None:
    user.groups.add(staff_only.groups.get())
    chat = Chat.objects.create(owner=user, model=staff_only)
    user.groups.clear()

    html = owner.get(_url("chat:detail", chat)).content.decode()
    notice = "Staff GPT is not available to you any more: new messages use Demo (offline)."
    assert notice in html and 'data-testid="composer-model-notice"' in html
    assert _picker_ids(html) == [str(demo_model.pk)]

    response = owner.post(_url("chat:send", chat), {"content": "still there?"})
    assert response.status_code == 200
    assert Turn.objects.get(chat=chat).model == demo_model
    chat.refresh_from_db()
    assert chat.model == demo_model  # the chat keeps the fallback: no notice from now on
    assert notice not in owner.get(_url("chat:detail", chat)).content.decode()


def test_the_admin_limits_a_model_to_groups(admin_client: Client, keyed_model: LLMModel) -> None:
    from django.contrib.auth.models import Group

    staff = Group.objects.create(name="staff")
    response = admin_client.post(_admin_url(keyed_model), _form_data(keyed_model, groups=[staff.pk]))
    assert response.status_code == 302
    assert list(keyed_model.groups.all()) == [staff]
    listing = admin_client.get(reverse("admin:chat_llmmodel_changelist")).content.decode()
    assert '<td class="field-for_groups">staff</td>' in listing


def test_the_chat_page_reads_the_owners_groups_and_budgets_with_the_chat(
    owner: Client,
    user: Any,
    chat: Chat,
    staff_only: LLMModel,
    redis_server: str,
    django_assert_num_queries: Any,
    steady_mcp_snapshot: None,
) -> None:
    from django.contrib.auth.models import Group

    from chat.models import Budget, Spend

    staff = staff_only.groups.get()
    user.groups.add(staff, Group.objects.create(name="night shift"))
    Budget.objects.create(group=staff, period="month", max_tokens=1_000)
    Spend.objects.create(user=user, model_name="demo/tessera", prompt_tokens=850)
    _long_chat(chat, 3, tool_calls=True)
    owner.get(_url("chat:detail", chat))  # stores the HTML, starts the budget's counter from the ledger

    # The ten of a page without budgets, and the budgets themselves now that one applies; the
    # groups still come with the chat.
    with django_assert_num_queries(11):
        page = owner.get(_url("chat:detail", chat)).content.decode()

    assert str(staff_only.pk) in _picker_ids(page)  # open to one of the owner's two groups
    assert "The monthly budget of your group staff is nearly used up: 150 tokens left until" in page


def test_knowledge_bases_are_read_for_the_popover_only_when_the_owner_may_see_one(
    owner: Client, user: Any, chat: Chat, django_assert_num_queries: Any, steady_mcp_snapshot: None
) -> None:
    from django.contrib.auth.models import Group

    from knowledge.models import KnowledgeBase

    _long_chat(chat, 3, tool_calls=True)
    owner.get(_url("chat:detail", chat))  # stores the HTML
    with django_assert_num_queries(10):
        assert "Handbook" not in owner.get(_url("chat:detail", chat)).content.decode()

    # Shared with one of the owner's groups: the page lists it, for one query more.
    team = Group.objects.create(name="team")
    user.groups.add(team)
    KnowledgeBase.objects.create(name="Handbook", owner=get_user_model().objects.create_user("kb-owner")).groups.add(
        team
    )
    with django_assert_num_queries(11):
        assert "Handbook" in owner.get(_url("chat:detail", chat)).content.decode()


def test_the_tools_popover_says_a_toolset_is_not_available_to_my_groups(owner: Client, user: Any, chat: Chat) -> None:
    from django.contrib.auth.models import Group

    from toolsets.models import ToolsetConfig

    staff = Group.objects.create(name="staff")
    ToolsetConfig.objects.create(toolset_id="clock_math").groups.add(staff)
    html = owner.get(_url("chat:detail", chat)).content.decode()
    reason = html.split('data-testid="toolset-reason-clock_math">', 1)[1].split("</div>", 1)[0]
    assert reason == "Not available to your groups"  # and no settings link: nothing to do there

    user.groups.add(staff)
    assert 'data-testid="toolset-reason-clock_math"' not in owner.get(_url("chat:detail", chat)).content.decode()
