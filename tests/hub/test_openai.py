"""The OpenAI-compatible API (hub/openai.py) through the official `openai` client against
the real stack: Daphne, a Celery worker, LiteLLM with the offline demo model or a scripted
OpenAI-compatible provider, and the audit log."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from chat.models import AppSettings, Chat, LLMModel, Turn
from hub.models import ApiToken
from tests.providers.replay import ReplayServer, Reply
from tests.providers.shapes import answer, call, calls, finish, role
from toolsets.models import ToolExecution

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city, from the caller's own service.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


@pytest.fixture
def switched_on(db: Any) -> None:
    settings = AppSettings.load()
    settings.openai_api = True
    settings.save()


@pytest.fixture
def token(user: Any) -> str:
    return ApiToken.issue(user, "script")[1]


def _client(stack: Any, token: str) -> Any:
    """The official client (typed loosely: the tests send plain dicts, as scripts do)."""
    return openai.OpenAI(base_url=f"{stack.url}/v1", api_key=token, max_retries=0, timeout=60)


@pytest.fixture
def provider() -> Iterator[ReplayServer]:
    server = ReplayServer().start()
    yield server
    server.stop()


def test_the_api_is_off_until_an_admin_switches_it_on(stack: Any, user: Any, token: str, demo_model: Any) -> None:
    with pytest.raises(openai.PermissionDeniedError) as refused:
        _client(stack, token).models.list()
    assert "switched off" in str(refused.value)


def test_a_wrong_token_is_refused_in_openais_shape(stack: Any, switched_on: None) -> None:
    with pytest.raises(openai.AuthenticationError) as refused:
        _client(stack, "tsk_not-a-token").chat.completions.create(
            model="tessera", messages=[{"role": "user", "content": "hi"}]
        )
    assert refused.value.code == "invalid_api_key"


def test_models_lists_the_models_and_agents_the_user_may_use(
    stack: Any, switched_on: None, token: str, demo_model: Any
) -> None:
    LLMModel.objects.create(name="Switched off", model="openai/gpt-x", enabled=False)
    ids = {model.id for model in _client(stack, token).models.list()}
    assert {"tessera", demo_model.name, "agent/researcher", "agent/general"} <= ids
    assert "Switched off" not in ids
    # An agent whose toolsets the user cannot use yet (no workspace set up) is not offered.
    assert "agent/workspace_assistant" not in ids


def test_a_completion_runs_tessera_tools_server_side_and_audits_them(
    stack: Any, switched_on: None, token: str, user: Any, demo_model: Any
) -> None:
    reply = _client(stack, token).chat.completions.create(
        model="tessera", messages=[{"role": "user", "content": "What is 12 * 34?"}]
    )
    choice = reply.choices[0]
    assert "408" in (choice.message.content or "")
    assert choice.finish_reason == "stop" and not choice.message.tool_calls
    turn = Turn.objects.get(pk=(reply.model_extra or {})["tessera"]["turn_id"])
    assert turn.status == Turn.Status.COMPLETED and turn.chat.owner == user
    # The tool ran through the executor, under the user's policies, in the audit log.
    record = ToolExecution.objects.get(turn=turn)
    assert (record.tool, record.status, record.user_id) == ("calculate", "success", user.pk)
    assert record.client == "openai: token script"
    assert (reply.model_extra or {})["tessera"]["tool_calls"][0]["tool"] == "calculate"
    # Not asked to keep it: the conversation stays out of the chat list.
    assert not turn.chat.listed
    assert reply.usage is not None and reply.usage.total_tokens > 0


def test_a_streamed_completion_sends_the_text_as_it_comes_and_the_usage_last(
    stack: Any, switched_on: None, token: str, demo_model: Any
) -> None:
    stream = _client(stack, token).chat.completions.create(
        model="tessera",
        messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 12 * 34?"}],
        stream=True,
        stream_options={"include_usage": True},
        extra_body={"tessera": {"save": True}},
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert "408" in text
    assert len([c for c in chunks if c.choices and c.choices[0].delta.content]) >= 2, "the text came in one piece"
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishes == ["stop"]
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 0
    # Asked to keep it: the conversation is in the user's chat list, titled by its question.
    chat = Chat.objects.get(title="What is 12 * 34?")
    assert chat.listed


def test_the_callers_own_tools_come_back_as_tool_calls_and_their_results_are_used(
    stack: Any, switched_on: None, token: str, provider: ReplayServer
) -> None:
    model = LLMModel.objects.create(name="Replay", model="openai/replay", api_base=provider.base_url, api_key="x")
    provider.play(
        Reply(
            [role(), calls(call(0, "call_w", "get_weather", '{"city": "Lyon"}')), finish("tool_calls")],
        ),
        answer("It is sunny in Lyon."),
    )
    client = _client(stack, token)
    question = [{"role": "user", "content": "Weather in Lyon?"}]
    first = client.chat.completions.create(model=model.name, messages=question, tools=[WEATHER])
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert [(c.function.name, c.function.arguments) for c in choice.message.tool_calls or []] == [
        ("get_weather", '{"city": "Lyon"}')
    ]
    # The model was offered the caller's tool beside Tessera's own.
    offered = {t["function"]["name"] for t in provider.requests[0].body["tools"]}
    assert "get_weather" in offered and any(name.startswith("toolset__") for name in offered)
    # Tessera did not run it: no audit row for a tool it does not have.
    assert not ToolExecution.objects.filter(tool="get_weather").exists()

    follow_up = [
        *question,
        choice.message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": (choice.message.tool_calls or [])[0].id, "content": "Sunny, 24 °C"},
    ]
    second = client.chat.completions.create(model=model.name, messages=follow_up, tools=[WEATHER])
    assert second.choices[0].message.content == "It is sunny in Lyon."
    sent = provider.requests[1].body["messages"]
    assert sent[-1] == {"role": "tool", "tool_call_id": "call_w", "content": "Sunny, 24 °C"}


def test_a_streamed_completion_returns_the_callers_tools_as_streamed_tool_calls(
    stack: Any, switched_on: None, token: str, provider: ReplayServer
) -> None:
    model = LLMModel.objects.create(name="Replay", model="openai/replay", api_base=provider.base_url, api_key="x")
    provider.play(
        Reply(
            [
                role(),
                calls(call(0, "call_a", "get_weather", '{"city": "Ly'), call(1, "call_b", "get_weather", "")),
                calls(call(0, args='on"}'), call(1, args='{"city": "Oslo"}')),
                finish("tool_calls"),
            ],
        ),
        answer("Sunny in Lyon, snow in Oslo."),
    )
    client = _client(stack, token)
    question = [{"role": "user", "content": "Weather in Lyon and Oslo?"}]
    chunks = list(client.chat.completions.create(model=model.name, messages=question, tools=[WEATHER], stream=True))
    # The official client's own way of putting streamed calls together: by index.
    found: dict[int, dict[str, str]] = {}
    for chunk in chunks:
        for delta in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
            slot = found.setdefault(delta.index, {"id": "", "name": "", "arguments": ""})
            slot["id"] += delta.id or ""
            slot["name"] += (delta.function.name or "") if delta.function else ""
            slot["arguments"] += (delta.function.arguments or "") if delta.function else ""
    assert [found[i] for i in sorted(found)] == [
        {"id": "call_a", "name": "get_weather", "arguments": '{"city": "Lyon"}'},
        {"id": "call_b", "name": "get_weather", "arguments": '{"city": "Oslo"}'},
    ]
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishes == ["tool_calls"]
    assert not ToolExecution.objects.filter(tool="get_weather").exists()
    follow_up = [
        *question,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": found[i]["id"],
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": found[i]["arguments"]},
                }
                for i in sorted(found)
            ],
        },
        {"role": "tool", "tool_call_id": "call_a", "content": "Sunny"},
        {"role": "tool", "tool_call_id": "call_b", "content": "Snow"},
    ]
    text = "".join(
        c.choices[0].delta.content or ""
        for c in client.chat.completions.create(model=model.name, messages=follow_up, tools=[WEATHER], stream=True)
        if c.choices
    )
    assert text == "Sunny in Lyon, snow in Oslo."
    assert provider.requests[1].body["messages"][-2:] == [
        {"role": "tool", "tool_call_id": "call_a", "content": "Sunny"},
        {"role": "tool", "tool_call_id": "call_b", "content": "Snow"},
    ]


def test_an_agent_answers_as_the_assistant_with_its_own_tools(
    stack: Any, switched_on: None, token: str, user: Any, demo_model: Any
) -> None:
    from toolsets.workspace.sample_data import seed_for_user

    seed_for_user(user)
    reply = _client(stack, token).chat.completions.create(
        model="agent/workspace_assistant", messages=[{"role": "user", "content": "List my tasks"}]
    )
    assert reply.choices[0].message.content
    turn = Turn.objects.get(pk=(reply.model_extra or {})["tessera"]["turn_id"])
    assert turn.chat.enabled_tools.keys() == {"workspace"}
    assert ToolExecution.objects.filter(turn=turn, toolset="workspace", tool="list_tasks", status="success").exists()
    # The tessera extension: what the tool cards say, and the sources the answer may cite.
    extension = (reply.model_extra or {})["tessera"]
    listed = next(call for call in extension["tool_calls"] if call["tool"] == "list_tasks")
    assert listed["status"] == "success" and listed["summary"] and listed["name"]
    assert extension["sources"] and extension["sources"][0]["n"] == 1
    assert {source["kind"] for source in extension["sources"]} == {"Task"}
    assert all(source["title"] for source in extension["sources"])


def test_a_caller_that_hangs_up_stops_its_turn(stack: Any, switched_on: None, token: str, demo_model: Any) -> None:
    import time

    stream = _client(stack, token).chat.completions.create(
        model="tessera",
        messages=[{"role": "user", "content": "[demo:slow] Explain the history of the web in detail."}],
        stream=True,
    )
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            break  # the answer is coming: hang up
    stream.close()
    deadline = time.monotonic() + 20
    turn = Turn.objects.get()
    while time.monotonic() < deadline and turn.status in Turn.ACTIVE:
        time.sleep(0.2)
        turn.refresh_from_db()
    assert turn.status == Turn.Status.CANCELLED


@pytest.mark.parametrize(
    ("body", "status", "param"),
    [
        ({"model": "tessera", "messages": []}, 400, "messages"),
        ({"model": "tessera"}, 400, None),
        ({"model": "tessera", "messages": [{"role": "robot", "content": "x"}]}, 400, "messages.0.role"),
        ({"model": "tessera", "messages": [{"role": "tool", "content": "x", "tool_call_id": "nope"}]}, 400, None),
        ({"model": "tessera", "messages": [{"role": "system", "content": "only a system message"}]}, 400, "messages"),
        (
            {"model": "tessera", "messages": [{"role": "user", "content": "x"}], "tools": [WEATHER, WEATHER]},
            400,
            "tools",
        ),
        ({"model": "no-such-model", "messages": [{"role": "user", "content": "x"}]}, 404, "model"),
    ],
)
def test_bad_requests_get_a_clear_error_in_openais_shape(
    stack: Any, switched_on: None, token: str, demo_model: Any, body: dict[str, Any], status: int, param: str | None
) -> None:
    response = httpx.post(
        f"{stack.url}/v1/chat/completions", json=body, headers={"Authorization": f"Bearer {token}"}, timeout=30
    )
    assert response.status_code == status, response.text
    problem = response.json()["error"]
    assert problem["message"] and problem["type"] == "invalid_request_error"
    if param is not None:
        assert problem["param"] == param
    assert Turn.objects.count() == 0, "nothing is started for a bad request"


def test_a_body_that_is_not_json_is_a_400(stack: Any, switched_on: None, token: str) -> None:
    response = httpx.post(
        f"{stack.url}/v1/chat/completions",
        content=b"{not json",
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        timeout=30,
    )
    assert response.status_code == 400 and "not valid JSON" in response.json()["error"]["message"]


def test_a_token_reaches_only_what_it_was_created_for(
    stack: Any, switched_on: None, user: Any, demo_model: Any
) -> None:
    no_agents = ApiToken.issue(user, "no agents", agents=False)[1]
    ids = {model.id for model in _client(stack, no_agents).models.list()}
    assert "tessera" in ids and not any(i.startswith("agent/") for i in ids)
    with pytest.raises(openai.NotFoundError):
        _client(stack, no_agents).chat.completions.create(
            model="agent/general", messages=[{"role": "user", "content": "hi"}]
        )
    no_tools = ApiToken.issue(user, "no tools", tools=False)[1]
    reply = _client(stack, no_tools).chat.completions.create(
        model="tessera", messages=[{"role": "user", "content": "What is 12 * 34?"}]
    )
    turn = Turn.objects.get(pk=(reply.model_extra or {})["tessera"]["turn_id"])
    assert turn.chat.enabled_tools == {} and not ToolExecution.objects.filter(turn=turn).exists()


def test_the_admin_chooses_what_the_api_exposes(stack: Any, switched_on: None, token: str, demo_model: Any) -> None:
    settings = AppSettings.load()
    settings.openai_api_toolsets = ["web"]
    settings.openai_api_agents = ["researcher"]
    settings.save()
    ids = {model.id for model in _client(stack, token).models.list()}
    assert {i for i in ids if i.startswith("agent/")} == {"agent/researcher"}
    reply = _client(stack, token).chat.completions.create(
        model="tessera", messages=[{"role": "user", "content": "What is 12 * 34?"}]
    )
    turn = Turn.objects.get(pk=(reply.model_extra or {})["tessera"]["turn_id"])
    assert set(turn.chat.enabled_tools) <= {"web", "agents"}
    assert turn.chat.enabled_tools.get("agents", ["researcher"]) == ["researcher"]
    assert not ToolExecution.objects.filter(turn=turn, toolset="clock_math").exists()


def test_the_admin_ticks_what_each_endpoint_exposes(admin_user: Any) -> None:
    from django.test import Client

    client = Client()
    client.force_login(admin_user)
    AppSettings.load()
    page = client.get("/admin/chat/appsettings/1/change/")
    assert page.status_code == 200
    html = page.content.decode()
    assert 'name="mcp_server_toolsets"' in html and 'value="clock_math"' in html
    assert 'name="openai_api_agents"' in html and 'value="researcher"' in html
    form = {
        "default_max_tool_iterations": 5,
        "max_tool_iterations_cap": 25,
        "max_delegation_depth": 1,
        "tool_catalogue_count": 30,
        "tool_catalogue_tokens": 6000,
        "running_turns_per_user": 4,
        "running_turns_per_token": 4,
        "openai_api": "on",
        "openai_api_agents": ["researcher"],
        "mcp_server_toolsets": ["clock_math", "web"],
    }
    assert client.post("/admin/chat/appsettings/1/change/", form).status_code == 302
    saved = AppSettings.objects.get(pk=1)
    assert saved.openai_api and saved.openai_api_agents == ["researcher"]
    assert saved.mcp_server_toolsets == ["clock_math", "web"] and saved.mcp_server_agents == []
    assert (
        client.post("/admin/chat/appsettings/1/change/", {**form, "mcp_server_agents": ["nobody"]}).status_code == 200
    )


def test_groups_decide_which_models_a_token_may_use(
    stack: Any, switched_on: None, token: str, user: Any, demo_model: Any
) -> None:
    from django.contrib.auth.models import Group

    staff = Group.objects.create(name="staff")
    private = LLMModel.objects.create(name="Staff model", model="demo/tessera")
    private.groups.add(staff)
    assert "Staff model" not in {m.id for m in _client(stack, token).models.list()}
    with pytest.raises(openai.NotFoundError):
        _client(stack, token).chat.completions.create(model="Staff model", messages=[{"role": "user", "content": "hi"}])
    user.groups.add(staff)
    assert "Staff model" in {m.id for m in _client(stack, token).models.list()}


def test_a_used_up_budget_is_the_callers_quota_not_a_provider_failure(
    stack: Any, switched_on: None, token: str, user: Any, demo_model: Any
) -> None:
    """The budget holds through the API as in the chat: refused before any model call, with
    OpenAI's 429 insufficient_quota and the budget's message; streamed, the same error event."""
    from chat.models import Budget, Spend

    Budget.objects.create(user=user, period="day", max_tokens=1)
    Spend.objects.create(user=user, model_name=demo_model.model, prompt_tokens=5)
    with pytest.raises(openai.RateLimitError) as refused:
        _client(stack, token).chat.completions.create(model="tessera", messages=[{"role": "user", "content": "hi"}])
    assert refused.value.status_code == 429 and refused.value.code == "budget"
    assert refused.value.type == "insufficient_quota"
    assert "your daily budget is used up" in str(refused.value)

    with httpx.stream(
        "POST",
        f"{stack.url}/v1/chat/completions",
        headers={"Authorization": f"Bearer {token}"},
        json={"model": "tessera", "stream": True, "messages": [{"role": "user", "content": "hi"}]},
        timeout=60,
    ) as response:
        events = [line for line in response.iter_lines() if line.startswith("data: ")]
    assert '"type": "insufficient_quota"' in events[-1] and "your daily budget is used up" in events[-1]
    assert Spend.objects.filter(user=user).count() == 1  # nothing was spent on the refused calls
