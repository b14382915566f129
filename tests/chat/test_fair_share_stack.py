"""The workers' fair share through the real stack (Daphne and a Celery worker of 16 threads):
one person's burst queues that person's own answers while another person's starts at once;
queued answers say so on their page and stop at Stop; an API caller over its cap gets a 429;
slots come back when answers are stopped or fail."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx
import openai
import pytest
from django.conf import settings
from django.test import Client

from chat.models import AppSettings, Chat, Turn
from hub.models import ApiToken

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

SLOW = "[demo:slow] Explain the history of the web in detail."
# More than the stack's worker has threads (tests/conftest.py): without caps, this burst alone
# would hold every one of them for the length of a slow answer.
BURST = 18


def _caps(user: int, token: int = 0, *, api: bool = False) -> None:
    app = AppSettings.load()
    app.running_turns_per_user, app.running_turns_per_token, app.openai_api = user, token, api
    app.save()


def _browser(stack: Any, user: Any) -> httpx.Client:
    client = Client()
    client.force_login(user)
    cookies = {settings.SESSION_COOKIE_NAME: client.cookies[settings.SESSION_COOKIE_NAME].value}
    http = httpx.Client(base_url=stack.url, cookies=cookies, timeout=30)
    http.get("/")
    http.headers.update({"X-CSRFToken": http.cookies["csrftoken"], "HX-Request": "true"})
    return http


def _send(http: httpx.Client, chat: Chat, content: str) -> None:
    response = http.post(f"/chats/{chat.pk}/messages/", data={"content": content})
    assert response.status_code == 200, response.text


def _wait(what: Callable[[], bool], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not what():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def _stop_all(http: httpx.Client, owner: Any) -> None:
    for chat in Chat.objects.filter(owner=owner):
        http.post(f"/chats/{chat.pk}/stop/")
    _wait(lambda: not Turn.objects.filter(chat__owner=owner, status__in=Turn.ACTIVE).exists())


def test_one_persons_burst_queues_their_own_answers_while_anothers_starts_at_once(
    stack: Any, user: Any, other_user: Any, demo_model: Any
) -> None:
    _caps(user=2)
    burster, other = _browser(stack, user), _browser(stack, other_user)
    chats = [Chat.objects.create(owner=user, model=demo_model) for _ in range(BURST)]
    for chat in chats:
        _send(burster, chat, SLOW)
    mine = Turn.objects.filter(chat__owner=user)
    _wait(lambda: mine.filter(status=Turn.Status.RUNNING).count() == 2)

    chat = Chat.objects.create(owner=other_user, model=demo_model)
    sent = time.monotonic()
    _send(other, chat, "What is 12*7?")
    theirs = Turn.objects.filter(chat=chat)
    _wait(lambda: theirs.filter(first_token_at__isnull=False).exists() or not theirs.get().is_active, timeout=30)
    waited = time.monotonic() - sent
    assert theirs.get().first_token_at is not None
    # The worker's threads were free for the other person: their first words came at once.
    assert waited < 2.0, f"the other person's first token took {waited:.1f} s"

    # The burst: two running, the rest waiting in their owner's queue, never more than the cap.
    assert mine.filter(status=Turn.Status.RUNNING).count() == 2
    queued = list(mine.filter(status=Turn.Status.QUEUED))
    # On a busy machine the first answers may have ended while the rest were still being sent:
    # those left the queue in order, through the two slots.
    done = mine.filter(status=Turn.Status.COMPLETED).count()
    assert len(queued) == BURST - 2 - done and len(queued) > 0
    # A queued answer says so on its page, after a reload too.
    page = burster.get(f"/chats/{queued[-1].chat_id}/")
    assert 'data-testid="queued-note"' in page.text and "Queued: you have 2 answers running" in page.text

    # Stop on a queued answer cancels it: it never runs, and the others move on.
    burster.post(f"/chats/{queued[-1].chat_id}/stop/")
    stopped = Turn.objects.get(pk=queued[-1].pk)
    assert stopped.status == Turn.Status.CANCELLED and stopped.started_at is None
    assert 'data-testid="queued-note"' not in burster.get(f"/chats/{queued[-1].chat_id}/").text

    # When a running answer ends (here: stopped), the next queued one starts promptly.
    first_running = mine.filter(status=Turn.Status.RUNNING).order_by("id").first()
    assert first_running is not None
    burster.post(f"/chats/{first_running.chat_id}/stop/")
    _wait(lambda: Turn.objects.get(pk=queued[0].pk).status == Turn.Status.RUNNING, timeout=5)
    assert mine.filter(status=Turn.Status.RUNNING).count() == 2
    _stop_all(burster, user)


def test_an_api_caller_over_its_cap_gets_a_429_and_a_stopped_answer_gives_its_slot_back(
    stack: Any, user: Any, demo_model: Any
) -> None:
    _caps(user=4, token=2, api=True)
    token = ApiToken.issue(user, "script")[1]
    client = openai.OpenAI(base_url=f"{stack.url}/v1", api_key=token, max_retries=0, timeout=60)
    streams = []
    for _ in range(2):
        stream = client.chat.completions.create(
            model="tessera", messages=[{"role": "user", "content": SLOW}], stream=True
        )
        for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                break  # running
        streams.append(stream)
    with pytest.raises(openai.RateLimitError) as refused:
        client.chat.completions.create(model="tessera", messages=[{"role": "user", "content": "What is 12*7?"}])
    response = refused.value.response
    assert response.status_code == 429 and int(response.headers["Retry-After"]) > 0
    error = response.json()["error"]
    assert error["type"] == "rate_limit_error" and error["code"] == "too_many_running"
    assert "This token already has 2 answers running" in error["message"]
    # Nothing was started for the refused call.
    assert Turn.objects.filter(chat__owner=user).count() == 2

    # Another token of the same person is still within the person's cap.
    other = openai.OpenAI(
        base_url=f"{stack.url}/v1", api_key=ApiToken.issue(user, "other")[1], max_retries=0, timeout=60
    )
    reply = other.chat.completions.create(model="tessera", messages=[{"role": "user", "content": "What is 12*7?"}])
    assert "84" in (reply.choices[0].message.content or "")

    # The caller hangs up on one stream: that answer stops and its slot comes back.
    streams[0].close()
    _wait(lambda: Turn.objects.filter(chat__owner=user, status=Turn.Status.CANCELLED).count() == 1, timeout=20)
    reply = client.chat.completions.create(model="tessera", messages=[{"role": "user", "content": "What is 12*7?"}])
    assert "84" in (reply.choices[0].message.content or "")
    streams[1].close()
    _wait(lambda: not Turn.objects.filter(chat__owner=user, status__in=Turn.ACTIVE).exists(), timeout=20)


def test_a_failed_answer_gives_its_slot_back(stack: Any, user: Any, demo_model: Any) -> None:
    _caps(user=1)
    http = _browser(stack, user)
    first, second = (Chat.objects.create(owner=user, model=demo_model) for _ in range(2))
    _send(http, first, "[demo:fail-before] Say something.")
    _send(http, second, "What is 12*7?")  # queued behind the first, which fails
    _wait(lambda: not Turn.objects.filter(chat__owner=user, status__in=Turn.ACTIVE).exists(), timeout=30)
    assert Turn.objects.get(chat=first).status == Turn.Status.FAILED
    assert Turn.objects.get(chat=second).status == Turn.Status.COMPLETED


def test_a_queued_answer_is_shown_queued_over_the_socket_before_a_reload(
    stack: Any, user: Any, demo_model: Any
) -> None:
    import asyncio

    import websockets

    _caps(user=1)
    http = _browser(stack, user)
    running, waiting = (Chat.objects.create(owner=user, model=demo_model) for _ in range(2))
    _send(http, running, SLOW)

    async def listen() -> str:
        header = "; ".join(f"{k}={v}" for k, v in http.cookies.items())
        async with websockets.connect(
            f"{stack.ws_url}/ws/chats/{waiting.pk}/", additional_headers={"Cookie": header, "Origin": stack.url}
        ) as ws:
            await asyncio.to_thread(_send, http, waiting, "What is 12*7?")
            while True:
                frame = str(await asyncio.wait_for(ws.recv(), timeout=20))
                if "queued-note" in frame:
                    return frame

    frame = asyncio.run(listen())
    assert frame.startswith(f"<!--status {Turn.objects.get(chat=waiting).pk}-->")
    assert 'hx-swap-oob="true"' in frame and "starts as soon as one of them finishes" in frame
    _stop_all(http, user)
