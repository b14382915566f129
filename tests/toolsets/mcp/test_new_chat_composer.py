"""The composer's MCP controls on the home page, before a chat exists: the servers are those of
the chat it would create (the user's toolsets selection there), a prompt with answered messages
creates that chat, and everything else stays with the composer. Against the real SDK test server."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import Group

from chat.models import AppSettings, Chat, LLMModel, Message, Turn, UserChatDefaults
from toolsets.files.models import Attachment
from toolsets.models import ToolsetConfig

from .test_prompts import _client, prompt_server  # noqa: F401 - the fixture

NEW = "/toolsets/mcp/chats/new"


def _select(user: Any, *toolsets: str) -> None:
    chosen = {t: ["echo"] for t in toolsets}
    UserChatDefaults.objects.update_or_create(user=user, defaults={"enabled_tools": chosen})


def test_the_home_menu_lists_the_prompts_of_the_servers_a_new_chat_would_use(prompt_server: Any, user: Any) -> None:  # noqa: F811
    client = _client(user)
    _select(user)
    assert "/review" not in client.get(f"{NEW}/prompts/").content.decode()
    assert client.get(f"{NEW}/ps/prompt/?name=review").status_code == 404
    _select(user, "mcp_ps")
    menu = client.get(f"{NEW}/prompts/")
    assert menu.status_code == 200
    assert "/review" in menu.content.decode() and "/picture" in menu.content.decode()
    form = client.get(f"{NEW}/ps/prompt/?name=review").content.decode()
    assert f'action="{NEW}/ps/prompt/use/"' in form
    assert "/toolsets/mcp/chats/new/ps/attach/" in client.get(f"{NEW}/resources/").content.decode()
    # The home page renders the controls for the new chat.
    assert 'data-menu-url="/toolsets/mcp/chats/new/prompts/"' in client.get("/").content.decode()


def test_a_server_kept_from_the_user_is_not_offered_on_the_home_page(prompt_server: Any, user: Any) -> None:  # noqa: F811
    _select(user, "mcp_ps")
    config = ToolsetConfig.objects.create(toolset_id="mcp_ps")
    config.groups.add(Group.objects.create(name="staff"))
    client = _client(user)
    assert "/review" not in client.get(f"{NEW}/prompts/").content.decode()
    assert client.post(f"{NEW}/ps/prompt/use/", {"name": "picture"}).status_code == 404
    assert client.post(f"{NEW}/ps/attach/", {"uri": "notes://today"}).status_code == 404
    assert not Chat.objects.exists()


def test_an_answered_prompt_on_the_home_page_creates_the_chat_with_its_settings(
    prompt_server: Any,  # noqa: F811
    user: Any,
    demo_model: Any,
) -> None:
    _select(user, "mcp_ps")
    model = LLMModel.objects.create(name="Second", model="demo/second")
    cap = AppSettings.load().max_tool_iterations_cap
    client = _client(user)
    data = {"name": "picture", "model": str(model.pk), "settings": "1"}
    data |= {"limit_tool_iterations": "on", "max_tool_iterations": "1"}
    answer = client.post(f"{NEW}/ps/prompt/use/", data)
    assert answer.status_code == 200, answer.content
    body = answer.json()
    (chat,) = Chat.objects.filter(owner=user)
    assert body["redirect"] == f"/chats/{chat.pk}/"
    assert chat.enabled_tools == {"mcp_ps": ["echo"]}
    assert chat.limit_tool_iterations and chat.max_tool_iterations == min(1, cap)
    assert chat.model_id == model.pk
    (turn,) = Turn.objects.filter(chat=chat)
    assert list(Message.objects.filter(turn=turn).values_list("role", flat=True)) == ["user", "assistant"]
    assert body["draft"] == "What colour is this pixel?"
    assert len(body["files"]) == 2
    assert Attachment.objects.filter(owner=user, message__isnull=True).count() == 2
    page = client.get(body["redirect"]).content.decode()
    assert "Is this an example?" in page


def test_a_question_only_prompt_or_a_resource_on_the_home_page_creates_no_chat(prompt_server: Any, user: Any) -> None:  # noqa: F811
    _select(user, "mcp_ps")
    client = _client(user)
    answer = client.post(f"{NEW}/ps/prompt/use/", {"name": "review", "arg.language": "rust"})
    assert answer.status_code == 200, answer.content
    assert "redirect" not in answer.json() and "rust" in answer.json()["draft"]
    attached = client.post(f"{NEW}/ps/attach/", {"uri": "notes://today"})
    assert attached.status_code == 201, attached.content
    assert not Chat.objects.exists()
    # The first message claims the resource's file, like an upload's.
    ids = [str(f["id"]) for f in attached.json()["files"]]
    Attachment.objects.filter(pk__in=ids).update(status=Attachment.Status.READY)
    sent = client.post("/chats/new/", {"content": "Read it", "attachments": ids})
    assert sent.status_code == 302
    (chat,) = Chat.objects.filter(owner=user)
    assert chat.enabled_tools["mcp_ps"] == ["echo"]
    question = Message.objects.get(chat=chat, role="user")
    assert list(question.files.values_list("pk", flat=True)) == [int(i) for i in ids]


def test_bad_home_page_requests_are_clear_4xx_and_create_nothing(
    prompt_server: Any,  # noqa: F811
    user: Any,
    other_user: Any,
) -> None:
    _select(user, "mcp_ps")
    client = _client(user)
    missing = client.post(f"{NEW}/ps/prompt/use/", {"name": "review"})
    assert missing.status_code == 400 and "form" in missing.json()
    bad_model = client.post(f"{NEW}/ps/prompt/use/", {"name": "picture", "model": "999999"})
    assert bad_model.status_code == 400 and bad_model.json()["error"]
    bad_steps = client.post(
        f"{NEW}/ps/prompt/use/",
        {"name": "picture", "settings": "1", "limit_tool_iterations": "on", "max_tool_iterations": "-5"},
    )
    assert bad_steps.status_code == 400 and bad_steps.json()["error"]
    assert client.get("/toolsets/mcp/chats/newer/prompts/").status_code == 404
    assert client.get(f"{NEW}/ps/prompt/?name=nope").status_code == 404
    # Another user's selection is theirs: someone who did not select the server sees nothing.
    _select(other_user)
    assert _client(other_user).post(f"{NEW}/ps/prompt/use/", {"name": "picture"}).status_code == 404
    assert not Chat.objects.exists() and not Turn.objects.exists()
