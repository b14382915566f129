"""Every model call is paid for, through the real stack (Daphne, a Celery worker, Redis, the demo
model through LiteLLM): a stream the caller closes, Stop in a chat, and a provider failure
mid-stream are each charged their prompt and the answer received so far — in the `Spend` ledger,
in the budget's counters, on the stopped message and in the user's token total. The demo model
reports usage only in its last chunk, so what was received is counted with LiteLLM's tokenizer.
A running summary cut mid-stream is charged the same way (a turn run in-process against a
scripted OpenAI-compatible provider)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx
import openai
import pytest
import redis
from django.conf import settings
from django.test import Client

from chat.live import key
from chat.models import AppSettings, Budget, Chat, Message, Spend, TokenUsage, Turn
from chat.spend import budgets
from demo import answers
from hub.models import ApiToken

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

LIMIT = 50_000  # tokens a month


@pytest.fixture
def budget(user: Any, demo_model: Any) -> Budget:
    return Budget.objects.create(user=user, period="month", max_tokens=LIMIT)


@pytest.fixture
def api(stack: Any, user: Any, demo_model: Any) -> Any:
    settings_row = AppSettings.load()
    settings_row.openai_api = True
    settings_row.save()
    token = ApiToken.issue(user, "script")[1]
    return openai.OpenAI(base_url=f"{stack.url}/v1", api_key=token, max_retries=0, timeout=60)


def _wait(condition: Callable[[], Any], what: str, timeout: float = 30) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError(what)


def _ended(turn_id: int) -> Turn:
    def done() -> Turn | None:
        turn = Turn.objects.get(pk=turn_id)
        return turn if turn.status not in Turn.ACTIVE else None

    return _wait(done, "the turn did not end")


def _answer_tokens(text: str) -> int:
    # Imported here, after `chat` has kept LiteLLM's price list local (no fetch at import).
    import litellm

    return int(litellm.token_counter(model="demo/tessera", text=text, count_response_tokens=True))


def _left(user: Any, redis_url: str) -> budgets.Left:
    [left] = budgets.left_for(user.pk, redis.from_url(redis_url))
    return left


def _charged_for_what_was_received(turn: Turn, status: str) -> Spend:
    """The turn's one model call: its ledger row is the prompt plus the answer as received (the
    message kept for the reader), and the message and the user's total say the same."""
    [cut] = Message.objects.filter(turn=turn, role=Message.Role.ASSISTANT)
    assert cut.metadata == {status: True} and cut.content
    [row] = Spend.objects.filter(user=turn.chat.owner)
    assert row.completion_tokens == _answer_tokens(cut.content) > 0
    # The system prompt alone is hundreds of tokens: the request was counted, not left out.
    assert row.prompt_tokens > 200
    assert (cut.prompt_tokens, cut.completion_tokens) == (row.prompt_tokens, row.completion_tokens)
    total = TokenUsage.objects.get(user=turn.chat.owner)
    assert (total.prompt_tokens, total.completion_tokens) == (row.prompt_tokens, row.completion_tokens)
    assert turn.usage["completion_tokens"] == row.completion_tokens
    return row


def test_a_v1_stream_the_caller_closes_is_charged_its_prompt_and_partial_answer(
    api: Any, user: Any, budget: Budget, redis_server: str
) -> None:
    assert _left(user, redis_server).tokens_left == LIMIT
    stream = api.chat.completions.create(
        model="tessera",
        messages=[{"role": "user", "content": "[demo:slow] Explain the history of the web in detail."}],
        stream=True,
    )
    received = ""
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            received += chunk.choices[0].delta.content
            if len(received) > 80:
                break  # a good part of the answer has come: hang up
    stream.close()

    turn = _ended(Turn.objects.get().pk)
    assert turn.status == Turn.Status.CANCELLED
    row = _charged_for_what_was_received(turn, "stopped")
    assert row.completion_tokens < _answer_tokens(answers.SLOW_TEXT), "only what was received"
    left = _left(user, redis_server)
    assert left.tokens_used == row.prompt_tokens + row.completion_tokens
    assert left.tokens_left == LIMIT - left.tokens_used < LIMIT


def test_stop_in_a_chat_mid_stream_charges_the_partial_answer(
    stack: Any, user: Any, demo_model: Any, budget: Budget, redis_server: str
) -> None:
    chat = Chat.objects.create(owner=user, model=demo_model)
    client = Client()
    client.force_login(user)
    cookies = {settings.SESSION_COOKIE_NAME: client.cookies[settings.SESSION_COOKIE_NAME].value}
    with httpx.Client(base_url=stack.url, cookies=cookies, timeout=30) as http:
        http.get(f"/chats/{chat.pk}/")
        headers = {"X-CSRFToken": http.cookies["csrftoken"], "HX-Request": "true"}
        sent = http.post(
            f"/chats/{chat.pk}/messages/", data={"content": "[demo:slow] Tell me a long story."}, headers=headers
        )
        assert sent.status_code == 200, sent.text
        turn = Turn.objects.get(chat=chat)
        live = redis.from_url(redis_server)
        # Stop once the answer is streaming: its live state holds some of the text.
        _wait(lambda: b"This reply" in (live.get(key(turn.pk, "live")) or b""), "no text came")
        assert http.post(f"/chats/{chat.pk}/stop/", headers=headers).status_code == 204

    turn = _ended(turn.pk)
    assert turn.status == Turn.Status.CANCELLED
    row = _charged_for_what_was_received(turn, "stopped")
    assert _left(user, redis_server).tokens_used == row.prompt_tokens + row.completion_tokens


def test_a_provider_failure_mid_stream_charges_what_was_received(
    api: Any, user: Any, budget: Budget, redis_server: str
) -> None:
    with pytest.raises(openai.APIStatusError) as failed:
        api.chat.completions.create(
            model="tessera", messages=[{"role": "user", "content": "[demo:fail-mid] Think it through."}]
        )
    assert failed.value.status_code == 502

    turn = _ended(Turn.objects.get().pk)
    assert turn.status == Turn.Status.FAILED
    row = _charged_for_what_was_received(turn, "failed")
    assert answers.FAIL_MID_TEXT.startswith(Message.objects.get(turn=turn, role="assistant").content)
    assert _left(user, redis_server).tokens_used == row.prompt_tokens + row.completion_tokens


def test_a_summary_cut_mid_stream_is_charged_with_the_summary_model(user: Any, redis_server: str) -> None:
    """The chat outgrows its model; the admin's summary model starts the running summary and
    its connection drops: that call is charged its prompt and the summary received so far,
    priced with the summary model, in the ledger, the budget and the user's total."""
    import asyncio
    from decimal import Decimal

    import litellm

    from chat.models import LLMModel
    from chat.worker.turns import run_turn
    from tests.chat.test_context_window import tool_heavy_chat
    from tests.providers.replay import ReplayServer, Reply
    from tests.providers.shapes import role, text

    replay = ReplayServer().start()
    replay.window = 6000
    try:
        model = LLMModel.objects.create(name="Replay", model="openai/replay", api_base=replay.base_url, api_key="x")
        chat = tool_heavy_chat(user, model, 8)
        summarizer = LLMModel.objects.create(
            name="Summarizer", model="openai/summarizer", api_base=replay.base_url, api_key="y", output_price=1000
        )
        app = AppSettings.load()
        app.summary_model = summarizer
        app.save()
        Budget.objects.create(user=user, period="month", max_tokens=LIMIT)
        replay.play(Reply([role(), text("Pages 0 to"), text(" 6 were"), text(" never sent")], cut_after=3))
        turn = Turn.objects.create(chat=chat, model=model)
        Message.objects.create(chat=chat, turn=turn, role="user", content="What did page 7 say?")

        asyncio.run(asyncio.wait_for(run_turn(turn.pk), 60))

        summary_request = replay.requests[1].messages
    finally:
        replay.stop()
    turn.refresh_from_db()
    assert turn.status == Turn.Status.FAILED
    [row] = Spend.objects.filter(user=user, model=summarizer)
    expected_prompt = litellm.token_counter(model="openai/summarizer", messages=summary_request)
    expected_answer = litellm.token_counter(
        model="openai/summarizer", text="Pages 0 to 6 were", count_response_tokens=True
    )
    assert (row.prompt_tokens, row.completion_tokens) == (expected_prompt, expected_answer)
    assert row.cost == Decimal(expected_answer * 1000) / 1_000_000 > 0
    # The first request was refused for its length: it cost nothing, so this is the only row.
    assert Spend.objects.filter(user=user).count() == 1
    total = TokenUsage.objects.get(user=user)
    assert (total.prompt_tokens, total.completion_tokens) == (expected_prompt, expected_answer)
    assert _left(user, redis_server).tokens_used == expected_prompt + expected_answer


def test_an_mcp_client_that_cancels_an_agent_pays_for_what_it_wrote(
    stack: Any, user: Any, demo_model: Any, budget: Budget, redis_server: str
) -> None:
    import asyncio

    import anyio
    import httpx2
    import mcp_types as types
    from mcp.client import Client as MCPClient
    from mcp.client.streamable_http import streamable_http_client

    settings_row = AppSettings.load()
    settings_row.mcp_server = True
    settings_row.save()
    token = ApiToken.issue(user, "desktop")[1]
    live = redis.from_url(redis_server)

    def streaming() -> bool:
        return any(b"This reply" in (live.get(k) or b"") for k in live.scan_iter("tessera:turn:*:live"))

    async def main() -> None:
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as http:
            transport = streamable_http_client(f"{stack.url}/mcp", http_client=http)
            info = types.Implementation(name="Test Desktop", version="1")
            client = MCPClient(transport, mode="legacy", client_info=info)  # type: ignore[arg-type]
            async with client, anyio.create_task_group() as group:
                task = {"task": "[demo:slow] Explain the history of the web in detail."}
                group.start_soon(client.call_tool, "delegate_to_general", task)
                with anyio.fail_after(30):
                    while not streaming():
                        await anyio.sleep(0.1)
                group.cancel_scope.cancel()  # the client gives up on the call mid-answer

    asyncio.run(main())
    turn = _ended(_wait(lambda: Turn.objects.filter(chat__owner=user).first(), "no turn").pk)
    assert turn.status == Turn.Status.CANCELLED
    row = _charged_for_what_was_received(turn, "stopped")
    assert _left(user, redis_server).tokens_used == row.prompt_tokens + row.completion_tokens
