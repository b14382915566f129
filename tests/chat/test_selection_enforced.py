"""Through the real worker: a model's call runs only if that tool was offered in that request.

A page the Web tool fetched, a file or an MCP result can tell any real model to call a tool the
chat never selected. The scripted provider (a local OpenAI-compatible server) does exactly that;
the call must be refused where tools run, recorded, and nothing of the unselected tool's data may
reach the provider or the page.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from chat.models import Chat, Message, Turn
from tests.providers.replay import ReplayServer, Reply
from tests.providers.shapes import answer, call, calls, finish, role
from tests.providers.worker_turns import finished, replay_model
from toolsets.models import ToolExecution
from toolsets.workspace.models import Task
from toolsets.workspace.sample_data import seed_for_user

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

LIST_TASKS = "toolset__workspace__list_tasks"


def _calling(name: str, arguments: dict[str, Any], call_id: str = "call_1") -> Reply:
    return Reply([role(), calls(call(0, call_id, name, json.dumps(arguments))), finish("tool_calls")])


def _tool_messages(request: Any) -> list[str]:
    return [str(m.get("content")) for m in request.messages if m.get("role") == "tool"]


@pytest.fixture
def secret_tasks(user: Any) -> list[str]:
    """The user's own task list: what an injected call would leak to the model."""
    seed_for_user(user)
    names = list(Task.objects.filter(user=user).values_list("name", flat=True))
    assert names
    return names


def test_a_call_to_an_unselected_tool_is_refused_recorded_and_shown(
    stack: Any, user: Any, provider: ReplayServer, secret_tasks: list[str]
) -> None:
    model = replay_model(provider)
    # Only Clock & math: the Workspace is usable for this user (sample data exists) but not selected.
    chat = Chat.objects.create(owner=user, model=model, enabled_tools={"clock_math": ["calculate", "current_time"]})
    provider.play(_calling(LIST_TASKS, {}), answer("I could not read your tasks."))
    client = Client()
    client.force_login(user)

    client.post(reverse("chat:send", args=[chat.pk]), {"content": "What is 2+2?"})
    turn = finished(chat)

    assert turn.status == Turn.Status.COMPLETED, turn.error
    offered = [t["function"]["name"] for t in provider.requests[0].body["tools"]]
    assert LIST_TASKS not in offered
    [refused] = _tool_messages(provider.requests[1])
    assert refused.startswith("Error (permission_denied):")
    assert "not among the tools selected for this chat" in refused
    assert not any(name in json.dumps(provider.requests[1].body) for name in secret_tasks)

    [record] = ToolExecution.objects.filter(turn=turn)
    assert (record.toolset, record.tool, record.status, record.error_type) == (
        "workspace",
        "list_tasks",
        "error",
        "permission_denied",
    )
    assert record.result is None
    [stored] = Message.objects.filter(turn=turn, role="tool")
    assert stored.content == refused
    page = client.get(reverse("chat:detail", args=[chat.pk])).content.decode()
    assert "not among the tools selected for this chat" in page
    assert not any(name in page for name in secret_tasks)


def test_a_subagent_runs_only_its_own_tools(
    stack: Any, user: Any, provider: ReplayServer, secret_tasks: list[str]
) -> None:
    """The Researcher has the Web tools; the chat has the Workspace selected. Inside the
    delegation the Workspace is not offered, so the subagent cannot call it either."""
    model = replay_model(provider)
    chat = Chat.objects.create(
        owner=user,
        model=model,
        enabled_tools={"workspace": ["list_tasks"], "web": ["fetch_page"], "agents": ["researcher"]},
    )
    provider.play(
        _calling("delegate_to_researcher", {"task": "Find the release date."}, "call_d"),
        _calling(LIST_TASKS, {}, "call_sub"),  # the subagent's first step
        answer("Nothing found."),  # the subagent's answer
        answer("The researcher found nothing."),  # the supervisor's answer
    )
    client = Client()
    client.force_login(user)

    client.post(reverse("chat:send", args=[chat.pk]), {"content": "Research the release date in depth."})
    turn = finished(chat)

    assert turn.status == Turn.Status.COMPLETED, turn.error
    assert LIST_TASKS in [t["function"]["name"] for t in provider.requests[0].body["tools"]]
    sub_offered = [t["function"]["name"] for t in provider.requests[1].body["tools"]]
    assert LIST_TASKS not in sub_offered and "toolset__web__fetch_page" in sub_offered
    [refused] = _tool_messages(provider.requests[2])
    assert "not among the tools given to this agent" in refused
    assert not any(name in json.dumps(provider.requests[2].body) for name in secret_tasks)
    assert not any(name in json.dumps(provider.requests[3].body) for name in secret_tasks)
    record = ToolExecution.objects.get(turn=turn, tool="list_tasks")
    assert (record.lane, record.status, record.error_type) == ("0-0", "error", "permission_denied")
