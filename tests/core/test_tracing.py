"""Traces (core/tracing.py, agent/spans.py, the executor's span) through the real processes:
a web process and a worker exporting to an OTLP receiver the test runs, a scripted provider, an
MCP server (the SDK's, over stdio) exporting its own spans to the same receiver, and a subagent.
One trace per turn, from the send request to the MCP server, with every parent link intact."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.conf import settings
from django.test import Client
from django.urls import reverse

from chat.models import AppSettings, Chat, LLMModel, Turn
from tests.otlp import OTLPReceiver
from tests.processes import BOOT_S, Processes, free_port, wait_until
from tests.providers.replay import ReplayServer, Reply
from tests.providers.shapes import answer, call, calls, finish, role, text
from tests.stdio_servers import forked
from tests.toolsets.mcp.conftest import register
from toolsets.models import ToolRule

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

TRACED_SERVER = Path(__file__).parent / "traced_mcp_server.py"
QUESTION = "Echo hello, and ask a helper to greet."
SECRET_IN_PROMPT = "sk-proj-9dQv7TzL4mWn2Xr8Kb5Yc1Hj"


@pytest.fixture
def receiver() -> Iterator[OTLPReceiver]:
    found = OTLPReceiver().start()
    yield found
    found.stop()


@pytest.fixture
def provider() -> Iterator[ReplayServer]:
    server = ReplayServer().start()
    yield server
    server.stop()


def _processes(tmp_path: Path, **env: str) -> tuple[Processes, int]:
    own = Processes(tmp_path / "stack")
    own.start_redis()
    # Exported within a fifth of a second, so the test need not wait for the default 5 s batch.
    env = {"OTEL_BSP_SCHEDULE_DELAY": "200", "DEBUG": "false", **env}
    port = free_port()
    own.env.update(env)
    own.worker(concurrency=4)
    own.web(port)
    wait_until(own.worker_alive, BOOT_S, "the worker did not start")
    return own, port


def _send(port: int, user: Any, chat: Chat, content: str) -> httpx.Response:
    """Sends a message as the browser does, through the web process: the session of a user
    signed in here, the CSRF token of the chat page."""
    client = Client()
    client.force_login(user)
    cookies = {settings.SESSION_COOKIE_NAME: client.cookies[settings.SESSION_COOKIE_NAME].value}
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", cookies=cookies, timeout=30) as browser:
        page = browser.get(reverse("chat:detail", args=[chat.pk]))
        assert page.status_code == 200
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
        assert token is not None
        return browser.post(
            reverse("chat:send", args=[chat.pk]),
            data={"content": content},
            headers={"X-CSRFToken": token.group(1), "HX-Request": "true"},
        )


def _finished(chat: Chat, timeout: float = 60) -> Turn:
    def done() -> Turn | None:
        turn = Turn.objects.filter(chat=chat).order_by("-id").first()
        return turn if turn is not None and not turn.is_active else None

    turn: Turn = wait_until(done, timeout, "the worker did not finish the turn")
    return turn


def _script(provider: ReplayServer) -> None:
    usage = {
        "choices": [],
        "usage": {
            "prompt_tokens": 1200,
            "completion_tokens": 7,
            "total_tokens": 1207,
            "prompt_tokens_details": {"cached_tokens": 1024},
        },
    }
    provider.play(
        Reply(
            [
                role(),
                calls(
                    call(0, "call_echo", "toolset__mcp_traced__echo", '{"text": "hello"}'),
                    call(1, "call_helper", "delegate_to_general", '{"task": "Greet the user."}'),
                ),
                finish("tool_calls"),
            ]
        ),
        answer("Hello from the helper."),
        Reply([role(), text("Both done."), finish("stop"), usage]),
    )


def _setup(user: Any, provider: ReplayServer, receiver: OTLPReceiver) -> Chat:
    register(
        name="Traced echo",
        slug="traced",
        transport="stdio",
        **forked(TRACED_SERVER),
        env=json.dumps({"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint}),
        timeout_s=20,
    )
    ToolRule.objects.create(toolset_id="mcp_traced", tool="echo", policy="auto")
    model = LLMModel.objects.create(name="Replay", model="openai/replay", api_base=provider.base_url, api_key="x")
    return Chat.objects.create(owner=user, model=model, enabled_tools={"mcp_traced": ["echo"], "agents": ["general"]})


def test_a_turn_is_one_trace_from_the_send_request_to_the_mcp_server(
    tmp_path: Path, user: Any, provider: ReplayServer, receiver: OTLPReceiver
) -> None:
    chat = _setup(user, provider, receiver)
    _script(provider)
    own, port = _processes(tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint)
    try:
        assert _send(port, user, chat, QUESTION).status_code == 200
        turn = _finished(chat)
        assert turn.status == Turn.Status.COMPLETED, turn.error

        def complete() -> list[dict[str, Any]]:
            spans = [s for s in receiver.snapshot() if s["trace_id"] == turn.trace_id]
            names = {s["name"] for s in spans}
            wanted = {"invoke_agent Tessera", "invoke_agent General", "tools/call echo"}
            return spans if wanted <= names and sum(n.startswith("chat ") for n in names) else []

        spans = wait_until(complete, 30, "the turn's spans did not all arrive")
    finally:
        own.close()

    # The turn's trace id, stored at send time, is the trace every part belongs to.
    assert re.fullmatch(r"[0-9a-f]{32}", turn.trace_id)
    by_id = {s["span_id"]: s for s in spans}

    def parent(span: dict[str, Any]) -> dict[str, Any]:
        assert span["parent_id"] in by_id, f"{span['name']} lost its parent"
        return by_id[span["parent_id"]]

    def one(name: str, **attributes: Any) -> dict[str, Any]:
        found = [
            s for s in spans if s["name"] == name and all(s["attributes"].get(k) == v for k, v in attributes.items())
        ]
        assert len(found) == 1, (name, attributes, [s["name"] for s in spans])
        return found[0]

    # Web: the send request is the root, served by the web process.
    send_route = "chats/<id:chat_id>/messages/"
    root = one(f"POST {send_route}")
    assert root["parent_id"] == "" and root["process"] == "web"
    assert root["attributes"]["http.route"] == send_route
    assert root["attributes"]["http.response.status_code"] == 200
    # Worker: the turn continues it (the context came in the Celery task's headers).
    agent = one("invoke_agent Tessera")
    assert parent(agent) is root and agent["process"] == "worker"
    assert agent["attributes"]["tessera.turn.id"] == turn.pk
    assert agent["attributes"]["tessera.outcome"] == "completed"

    # Model calls: GenAI spans under the turn, with model, provider, tokens and finish reasons.
    model_calls = [s for s in spans if s["name"] == "chat openai/replay"]
    assert len(model_calls) == 3
    main_calls = [s for s in model_calls if parent(s) is agent]
    assert len(main_calls) == 2
    first, last = sorted(main_calls, key=lambda s: s["attributes"]["gen_ai.response.finish_reasons"] != ["tool_calls"])
    assert first["attributes"]["gen_ai.response.finish_reasons"] == ["tool_calls"]
    assert last["attributes"]["gen_ai.operation.name"] == "chat"
    assert last["attributes"]["gen_ai.system"] == "openai"
    assert last["attributes"]["gen_ai.request.model"] == "openai/replay"
    assert last["attributes"]["gen_ai.usage.input_tokens"] == 1200
    assert last["attributes"]["gen_ai.usage.output_tokens"] == 7
    assert last["attributes"]["gen_ai.usage.cache_read.input_tokens"] == 1024
    assert last["attributes"]["gen_ai.response.finish_reasons"] == ["stop"]
    # Content is opt-in: off by default.
    assert not any("gen_ai.input.messages" in s["attributes"] for s in model_calls)

    # The tool call: what the executor decided, under the turn.
    echo = one("execute_tool toolset__mcp_traced__echo")
    assert parent(echo) is agent
    assert echo["attributes"]["tessera.toolset"] == "mcp_traced"
    assert echo["attributes"]["tessera.tool.policy"] == "auto"
    assert echo["attributes"]["tessera.tool.cache_hit"] is False
    assert echo["attributes"]["tessera.tool.breaker"] == "closed"
    assert echo["attributes"]["tessera.tool.outcome"] == "success"
    # The MCP request: the SDK's client span under the tool call, then the server's own span
    # (exported by the server process) continuing the trace from the request's `_meta`.
    server_span = one("tools/call echo")
    assert server_span["service"] == "echo-mcp-server"
    client_span = parent(server_span)
    assert client_span["name"] == "MCP send tools/call echo"
    assert parent(client_span) is echo

    # The subagent: its delegation call, its own agent span, and its model call under that.
    delegation = one("execute_tool delegate_to_general")
    assert parent(delegation) is agent
    sub = one("invoke_agent General")
    assert parent(sub) is delegation
    assert sub["attributes"]["tessera.agent.depth"] == 1
    assert [s for s in model_calls if parent(s) is sub]


def test_prompts_and_answers_are_in_spans_only_when_the_admin_opts_in_and_redacted(
    tmp_path: Path, user: Any, provider: ReplayServer, receiver: OTLPReceiver
) -> None:
    chat = _setup(user, provider, receiver)
    AppSettings.objects.update_or_create(pk=1, defaults={"trace_content": True})
    provider.play(answer("Noted."))
    # The provider's key, which the worker holds as a secret, is written into the question.
    model = LLMModel.objects.get(chats=chat)
    model.api_key = SECRET_IN_PROMPT
    model.save()
    own, port = _processes(tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint)
    try:
        assert _send(port, user, chat, f"Remember {SECRET_IN_PROMPT} and the word aubergine.").status_code == 200
        turn = _finished(chat)

        def model_call() -> dict[str, Any] | None:
            found = [s for s in receiver.snapshot() if s["trace_id"] == turn.trace_id and s["name"].startswith("chat ")]
            return found[0] if found else None

        span = wait_until(model_call, 30, "the model call's span did not arrive")
    finally:
        own.close()
    sent = span["attributes"]["gen_ai.input.messages"]
    assert "aubergine" in sent and SECRET_IN_PROMPT not in sent and "[redacted]" in sent
    assert "Noted." in span["attributes"]["gen_ai.output.messages"]


def test_nothing_is_exported_when_traces_are_off(
    tmp_path: Path, user: Any, provider: ReplayServer, receiver: OTLPReceiver
) -> None:
    chat = _setup(user, provider, receiver)
    provider.play(answer("Fine."))
    # No endpoint for the web process and the worker (the MCP server still has its own).
    own, port = _processes(tmp_path)
    try:
        assert _send(port, user, chat, "Hello").status_code == 200
        turn = _finished(chat)
        assert turn.status == Turn.Status.COMPLETED, turn.error
    finally:
        own.close()
    assert turn.trace_id == ""
    # The MCP server exports its own spans, as its operator set it up; Tessera's processes none.
    assert receiver.snapshot(), "the receiver got nothing at all: the test would prove nothing"
    assert [s["name"] for s in receiver.snapshot() if s["service"] != "echo-mcp-server"] == []
