from __future__ import annotations

import json
from typing import Any

import pytest

from chat import export
from chat.models import Chat, Message, Turn

pytestmark = pytest.mark.django_db


@pytest.fixture
def chat(user: Any, demo_model: Any) -> Chat:
    chat = Chat.objects.create(owner=user, title="Tokyo time ```", model=demo_model)
    turn = Turn.objects.create(chat=chat, status=Turn.Status.COMPLETED)
    call = {"id": "call_1", "type": "function", "function": {"name": "get_time", "arguments": '{"city":"Tokyo"}'}}
    Message.objects.create(chat=chat, turn=turn, role="user", content="What time is it in Tokyo?")
    Message.objects.create(chat=chat, turn=turn, role="assistant", content="", tool_calls=[call], step=0)
    Message.objects.create(chat=chat, turn=turn, role="tool", tool_call_id="call_1", content="```\n09:00 JST")
    Message.objects.create(chat=chat, turn=turn, role="assistant", content="It is **09:00** in Tokyo.", step=1)
    Message.objects.create(chat=chat, turn=turn, role="assistant", content="hidden", lane="0-0", step=0)
    return chat


def test_json_is_the_openai_transcript_with_calls_and_results(chat: Chat) -> None:
    data = json.loads(export.as_json(chat, export.transcript(chat)))
    assert data["title"] == "Tokyo time ```" and data["model"] == "demo/tessera"
    assert data["messages"] == [
        {"role": "user", "content": "What time is it in Tokyo?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "get_time", "arguments": '{"city":"Tokyo"}'}}
            ],
        },
        {"role": "tool", "content": "```\n09:00 JST", "tool_call_id": "call_1"},
        {"role": "assistant", "content": "It is **09:00** in Tokyo."},
    ]


def test_markdown_has_each_message_call_and_fenced_result(chat: Chat) -> None:
    text = export.as_markdown(chat, export.transcript(chat))
    assert text.startswith("# Tokyo time ```\n\n_Exported from Tessera on ")
    assert "## You\n\nWhat time is it in Tokyo?" in text
    assert '### Tool call: `get_time`\n\n```json\n{\n  "city": "Tokyo"\n}\n```' in text
    # The result holds a fence itself: it is wrapped in a longer one.
    assert "### Result of `get_time`\n\n````\n```\n09:00 JST\n````" in text
    assert "## Assistant\n\nIt is **09:00** in Tokyo." in text
    assert "hidden" not in text


def test_filename_is_safe(chat: Chat) -> None:
    assert export.filename(chat, "md") == f"tokyo-time-{chat.pk}.md"
    chat.title = "../../etc/passwd\r\nX: y"
    assert export.filename(chat, "json") == f"etcpasswd-x-y-{chat.pk}.json"
    chat.title = "日本"
    assert export.filename(chat, "md") == f"chat-{chat.pk}.md"
