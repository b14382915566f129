"""core/tracing.py in one process: when traces are on, what travels in a task's headers, and the
admin's link to a turn's trace."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from chat.models import Chat, Turn
from core import tracing

OTEL_VARIABLES = (
    "TESSERA_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_SDK_DISABLED",
    "OTEL_TRACES_EXPORTER",
)


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in OTEL_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_traces_are_off_without_an_endpoint(clean_env: pytest.MonkeyPatch) -> None:
    assert not tracing.configured()
    assert tracing.setup("test") is False
    assert not tracing.enabled()
    assert tracing.task_headers() == {}
    assert tracing.trace_id() == ""


@pytest.mark.parametrize(
    ("variables", "expected"),
    [
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, True),
        ({"TESSERA_OTLP_ENDPOINT": "http://collector:4318"}, True),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_SDK_DISABLED": "true"}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_TRACES_EXPORTER": "none"}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "  "}, False),
    ],
)
def test_what_turns_traces_on(clean_env: pytest.MonkeyPatch, variables: dict[str, str], expected: bool) -> None:
    for name, value in variables.items():
        clean_env.setenv(name, value)
    assert tracing.configured() is expected


def test_a_tasks_trace_context_is_read_from_its_headers_or_its_request() -> None:
    parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    assert tracing.carrier_from(SimpleNamespace(traceparent=parent, headers=None)) == {"traceparent": parent}
    assert tracing.carrier_from(SimpleNamespace(headers={"traceparent": parent, "tracestate": "a=1"})) == {
        "traceparent": parent,
        "tracestate": "a=1",
    }
    assert tracing.carrier_from(SimpleNamespace(headers=None)) == {}
    assert tracing.carrier_from(SimpleNamespace(traceparent=7, headers=None)) == {}


def test_the_trace_link_fills_the_admins_template(settings: Any) -> None:
    settings.TRACE_URL = "https://jaeger.example/trace/{trace_id}"
    assert tracing.trace_link("ab" * 16) == "https://jaeger.example/trace/" + "ab" * 16
    assert tracing.trace_link("") == ""
    settings.TRACE_URL = "https://jaeger.example/"  # no placeholder: no link
    assert tracing.trace_link("ab" * 16) == ""


@pytest.mark.django_db
def test_the_admin_shows_a_turns_and_a_messages_trace_linked_to_the_tracing_ui(
    admin_user: Any, user: Any, demo_model: Any, settings: Any
) -> None:
    settings.TRACE_URL = "https://traces.example/trace/{trace_id}"
    chat = Chat.objects.create(owner=user, model=demo_model)
    trace = "4bf92f3577b34da6a3ce929d0e0e4736"
    turn = Turn.objects.create(chat=chat, model=demo_model, trace_id=trace)
    message = chat.messages.create(turn=turn, role="user", content="Hi")
    client = Client()
    client.force_login(admin_user)

    page = client.get(reverse("admin:chat_turn_change", args=[turn.pk])).content.decode()
    assert f'href="https://traces.example/trace/{trace}"' in page and 'rel="noopener noreferrer"' in page
    assert trace in client.get(reverse("admin:chat_message_change", args=[message.pk])).content.decode()
    # A trace id pasted from the tracing UI finds its turn.
    found = client.get(reverse("admin:chat_turn_changelist"), {"q": trace}).content.decode()
    assert f"/admin/chat/turn/{turn.pk}/change/" in found

    settings.TRACE_URL = ""
    page = client.get(reverse("admin:chat_turn_change", args=[turn.pk])).content.decode()
    assert trace in page and "traces.example" not in page
