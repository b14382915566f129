"""Through the real worker: a tool result that carries a secret Tessera holds never shows it.

An MCP server (built with the SDK, started by the worker over stdio) returns its whole
environment, which holds a credential the admin configured for it. The value must not reach the
provider, the page, the database, Redis or the worker's log; the rest of the result does.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import redis
from django.test import Client
from django.urls import reverse

from chat.models import Chat, Message, Turn
from tests.providers.replay import ReplayServer, Reply
from tests.providers.shapes import answer, call, calls, finish, role
from tests.providers.worker_turns import finished, replay_model
from tests.stdio_servers import forked
from tests.toolsets.mcp.conftest import register, seen_by_stack
from toolsets.models import ToolExecution, ToolRule

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

ECHO_SERVER = Path(__file__).parents[1] / "toolsets" / "mcp" / "echo_server.py"
SERVICE_TOKEN = "svc-7Hq2LmX9pR4vT1wZ"


def test_a_servers_environment_echoed_by_its_tool_is_redacted_everywhere(
    stack: Any, user: Any, provider: ReplayServer, redis_server: str
) -> None:
    register(
        name="Echo",
        slug="envs",
        transport="stdio",
        **forked(ECHO_SERVER),
        env=json.dumps({"SERVICE_TOKEN": SERVICE_TOKEN, "SERVICE_REGION": "eu-west-3"}),
        timeout_s=10,
    )
    # The admin lets it run without asking (a server's own hints decide nothing).
    ToolRule.objects.create(toolset_id="mcp_envs", tool="get_env", policy="auto")
    # The stack's worker offers the server's tool once it has read the servers again (a fast
    # registration beat that once, and the turn ran without the tool).
    seen_by_stack()
    model = replay_model(provider)
    chat = Chat.objects.create(owner=user, model=model, enabled_tools={"mcp_envs": ["get_env"]})
    provider.play(
        Reply([role(), calls(call(0, "call_env", "toolset__mcp_envs__get_env", "{}")), finish("tool_calls")]),
        answer("Your server has a PATH and a region."),
    )
    client = Client()
    client.force_login(user)

    client.post(reverse("chat:send", args=[chat.pk]), {"content": "Where does the echo server run?"})
    turn = finished(chat)

    assert turn.status == Turn.Status.COMPLETED, turn.error
    record = ToolExecution.objects.get(turn=turn)
    assert record.status == "success", record.error
    stored = json.dumps(record.result)
    # The result is there, and useful; the values the admin configured are gone (every one of
    # them counts as a credential: Tessera cannot tell a token from a region).
    assert '\\"PATH\\"' in stored and '\\"SERVICE_REGION\\": \\"[redacted]\\"' in stored
    assert "eu-west-3" not in stored
    sent = json.dumps(provider.requests[1].body)
    assert "SERVICE_REGION" in sent and "[redacted]" in sent
    places = {
        "the provider": sent,
        "the tool record": stored,
        "the messages": json.dumps(list(Message.objects.filter(chat=chat).values("content", "metadata", "html"))),
        "the page": client.get(reverse("chat:detail", args=[chat.pk])).content.decode(),
        "the worker's log": (stack.logs / "worker.log").read_text(errors="replace"),
    }
    live = redis.from_url(redis_server)
    places["Redis"] = " ".join(str(live.get(key)) for key in live.scan_iter("tessera:*") if live.type(key) == b"string")
    for where, text in places.items():
        assert SERVICE_TOKEN not in text, f"the configured secret reached {where}"
