"""Knowledge bases attached to an admin's agent: its runs search those bases only, and only
the ones the user it works for may see (checked where the tool runs)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth.models import Group
from django.core.cache import cache
from django.test import Client
from django.urls import reverse

from chat import agents
from chat.models import AgentDefinition, Chat, LLMModel, Turn
from knowledge.models import ChatBase
from knowledge.tools import search_knowledge
from tests.providers.replay import ReplayServer, Reply
from tests.providers.shapes import answer, call, calls, finish, role
from toolsets.base import ToolContext
from toolsets.executor import execute

HANDBOOK = b"# Handbook\n\n## Proxy\n\nThe proxy setting lives in Preferences, under Network.\n"
ARCHIVE = b"# Archive\n\n## Proxy\n\nThe old proxy setting lived in the control panel.\n"
SEARCH = "toolset__knowledge__search_knowledge"


def _agent(*bases: Any, toolsets: list[str] | None = None) -> AgentDefinition:
    cache.delete(AgentDefinition.CACHE_KEY)
    row = AgentDefinition.objects.create(
        name="Helpdesk",
        slug="helpdesk",
        description="Answers from the handbook.",
        instructions="Be brief.",
        toolsets=toolsets or [],
    )
    row.knowledge_bases.set(bases)
    return row


def _titles(result: dict[str, Any]) -> set[str]:
    return {hit["title"] for hit in result["passages"]}


@pytest.mark.django_db
def test_an_agent_with_bases_gets_the_knowledge_tools_and_searches_only_them(
    user: Any, other_user: Any, make_base: Any, add_document: Any
) -> None:
    team = Group.objects.create(name="Support")
    handbook = make_base(user, "Handbook", groups=[team])
    archive = make_base(user, "Archive")
    add_document(handbook, "handbook.md", HANDBOOK)
    add_document(archive, "archive.md", ARCHIVE)
    _agent(handbook)

    spec = agents.agents()["helpdesk"]
    assert spec.toolsets == ("knowledge",) and spec.scope == {"knowledge_bases": [handbook.pk]}

    chat = Chat.objects.create(owner=user)
    ChatBase.objects.create(chat=chat, base=archive)  # the chat's own base is not the agent's
    mine = search_knowledge.func(ToolContext(user_id=user.pk, chat_id=chat.pk, scope=spec.scope), "proxy setting")
    assert _titles(mine) == {"handbook.md"}
    with pytest.raises(LookupError, match="no knowledge base with that id"):
        search_knowledge.func(ToolContext(user_id=user.pk, scope=spec.scope), "proxy", bases=[archive.pk])

    # A user outside the base's groups gets nothing from it through the agent.
    with pytest.raises(LookupError, match="shared with you"):
        search_knowledge.func(ToolContext(user_id=other_user.pk, scope=spec.scope), "proxy")
    other_user.groups.add(team)
    assert _titles(search_knowledge.func(ToolContext(user_id=other_user.pk, scope=spec.scope), "proxy")) == {
        "handbook.md"
    }


@pytest.mark.django_db(transaction=True)
def test_the_executor_hands_the_agents_scope_to_the_tool(user: Any, make_base: Any, add_document: Any) -> None:
    handbook, archive = make_base(user, "Handbook"), make_base(user, "Archive")
    add_document(handbook, "handbook.md", HANDBOOK)
    add_document(archive, "archive.md", ARCHIVE)

    done = async_to_sync(execute)(
        SEARCH, {"query": "proxy"}, user_id=user.pk, tool_call_id="c", scope={"knowledge_bases": [archive.pk]}
    )

    assert done.error is None and _titles(done.result) == {"archive.md"}


@pytest.fixture
def provider() -> Iterator[ReplayServer]:
    server = ReplayServer().start()
    yield server
    server.stop()


def _calling(name: str, arguments: dict[str, Any], call_id: str) -> Reply:
    return Reply([role(), calls(call(0, call_id, name, json.dumps(arguments))), finish("tool_calls")])


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_a_delegated_run_searches_its_agents_bases(
    stack: Any, user: Any, make_base: Any, add_document: Any, provider: ReplayServer
) -> None:
    handbook, archive = make_base(user, "Handbook"), make_base(user, "Archive")
    add_document(handbook, "handbook.md", HANDBOOK)
    add_document(archive, "archive.md", ARCHIVE)
    _agent(handbook)
    model = LLMModel.objects.create(name="Replay", model="openai/replay", api_base=provider.base_url, api_key="x")
    chat = Chat.objects.create(owner=user, model=model, enabled_tools={"agents": ["helpdesk"]})
    provider.play(
        _calling("delegate_to_helpdesk", {"task": "Where is the proxy setting?"}, "call_d"),
        _calling(SEARCH, {"query": "proxy setting"}, "call_s"),
        answer("In Preferences, under Network."),
        answer("Preferences, Network."),
    )
    client = Client()
    client.force_login(user)

    client.post(reverse("chat:send", args=[chat.pk]), {"content": "Ask the helpdesk where the proxy setting is."})
    deadline = time.monotonic() + 60
    while Turn.objects.get(chat=chat).is_active and time.monotonic() < deadline:
        time.sleep(0.1)

    turn = Turn.objects.get(chat=chat)
    assert turn.status == Turn.Status.COMPLETED, turn.error
    assert SEARCH not in json.dumps(provider.requests[0].body.get("tools", []))
    assert SEARCH in {t["function"]["name"] for t in provider.requests[1].body["tools"]}
    result = next(m for m in provider.requests[2].body["messages"] if m["role"] == "tool")
    assert "Preferences, under Network" in result["content"] and "control panel" not in result["content"]
