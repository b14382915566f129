"""Approval cards with the real worker: an "ask" tool call waits for the chat's owner — approved,
denied, timed out, approved after a reload — while the worker's other turns keep streaming; and a
result cache hit through a real turn."""

from __future__ import annotations

import asyncio
import itertools
import re
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import websockets
from django.conf import settings
from django.test import Client

from chat.models import Chat, Message, Turn
from toolsets.exa.fake_server import FAKE_API_KEY, FakeExa
from toolsets.models import ChatToolAllowance, PolicySettings, ToolExecution, ToolsetConfig, UserToolsetConfig
from toolsets.workspace.models import Task
from toolsets.workspace.sample_data import seed_for_user

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

APPROVAL = re.compile(r'data-approval="([A-Za-z0-9_-]{16,64})"')
DONE = ('data-turn-status="completed"', 'data-turn-status="failed"', 'data-turn-status="cancelled"')
CREATE = 'Create a task "Ship the approval card" in Website relaunch'


class Session:
    """One logged-in user talking to the real stack: HTTP with CSRF, and the chat's socket."""

    def __init__(self, stack: Any, user: Any) -> None:
        client = Client()
        client.force_login(user)
        self.cookies = {settings.SESSION_COOKIE_NAME: client.cookies[settings.SESSION_COOKIE_NAME].value}
        self.http = httpx.Client(base_url=stack.url, cookies=self.cookies, timeout=30)
        self.http.get("/toolsets/")
        self.csrf = self.http.cookies["csrftoken"]
        self.stack = stack

    def socket(self, chat: Chat) -> Any:
        header = "; ".join(f"{k}={v}" for k, v in {**self.cookies, "csrftoken": self.csrf}.items())
        return websockets.connect(
            f"{self.stack.ws_url}/ws/chats/{chat.pk}/", additional_headers={"Cookie": header, "Origin": self.stack.url}
        )

    async def send(self, chat: Chat, text: str) -> None:
        response = await asyncio.to_thread(
            self.http.post,
            f"/chats/{chat.pk}/messages/",
            data={"content": text},
            headers={"X-CSRFToken": self.csrf, "HX-Request": "true"},
        )
        assert response.status_code == 200, response.text

    async def answer(self, approval_id: str, **data: str) -> httpx.Response:
        return await asyncio.to_thread(
            self.http.post, f"/approvals/{approval_id}/", data=data, headers={"X-CSRFToken": self.csrf}
        )


async def until(ws: Any, predicate: Any, frames: list[str], within: float = 30) -> str:
    deadline = time.monotonic() + within
    while True:
        frame = str(await asyncio.wait_for(ws.recv(), timeout=max(0.1, deadline - time.monotonic())))
        frames.append(frame)
        if predicate(frame):
            return frame


def approval_id(frame: str) -> str:
    found = APPROVAL.search(frame)
    assert found, frame
    return found.group(1)


def finished(frame: str) -> bool:
    return any(d in frame for d in DONE)


@pytest.fixture
def workspace_chat(user: Any, demo_model: Any) -> Chat:
    seed_for_user(user)
    return Chat.objects.create(
        owner=user, model=demo_model, enabled_tools={"workspace": ["create_task", "list_projects"]}
    )


@pytest.fixture
def session(stack: Any, user: Any) -> Session:
    return Session(stack, user)


def tool_result(chat: Chat) -> str:
    return Message.objects.get(chat=chat, role="tool").content


def test_approved_call_runs_and_the_turn_continues(session: Session, workspace_chat: Chat) -> None:
    async def run() -> list[str]:
        frames: list[str] = []
        async with session.socket(workspace_chat) as ws:
            await session.send(workspace_chat, CREATE)
            card = await until(ws, APPROVAL.search, frames)
            assert "Needs approval" in card and "Ship the approval card" in card
            assert not Task.objects.filter(name="Ship the approval card").exists()
            response = await session.answer(approval_id(card), decision="approve")
            assert response.status_code == 200
            await until(ws, finished, frames)
        return frames

    frames = asyncio.run(run())
    assert 'data-turn-status="completed"' in frames[-1]
    assert Task.objects.filter(name="Ship the approval card", user=workspace_chat.owner).exists()
    execution = ToolExecution.objects.get(tool="create_task")
    assert (execution.status, execution.policy, execution.approval) == ("success", "ask", "approved")
    assert not ChatToolAllowance.objects.exists()


def test_denied_call_tells_the_model_why(session: Session, workspace_chat: Chat) -> None:
    async def run() -> None:
        frames: list[str] = []
        async with session.socket(workspace_chat) as ws:
            await session.send(workspace_chat, CREATE)
            card = await until(ws, APPROVAL.search, frames)
            response = await session.answer(approval_id(card), decision="deny", reason="Use the Mobile app project")
            assert response.status_code == 200
            await until(ws, finished, frames)
            assert any("permission_denied" in f and "Use the Mobile app project" in f for f in frames)

    asyncio.run(run())
    assert not Task.objects.filter(name="Ship the approval card").exists()
    content = tool_result(workspace_chat)
    assert content.startswith("Error (permission_denied): The user denied this call")
    assert content.endswith("Their reason: Use the Mobile app project")
    turn = Turn.objects.get(chat=workspace_chat)
    assert turn.status == Turn.Status.COMPLETED  # the loop went on and answered
    assert ToolExecution.objects.get(tool="create_task").approval == "denied"


def test_an_unanswered_call_times_out_as_denied(session: Session, workspace_chat: Chat) -> None:
    PolicySettings(approval_timeout_s=2).save()
    try:

        async def run() -> float:
            frames: list[str] = []
            async with session.socket(workspace_chat) as ws:
                await session.send(workspace_chat, CREATE)
                await until(ws, APPROVAL.search, frames)
                asked = time.monotonic()
                await until(ws, finished, frames)
                return time.monotonic() - asked

        waited = asyncio.run(run())
    finally:
        PolicySettings(approval_timeout_s=600).save()
    assert 1.5 < waited < 15
    assert "Nobody approved this call within 2 s" in tool_result(workspace_chat)
    assert ToolExecution.objects.get(tool="create_task").approval == "timed_out"
    assert not Task.objects.filter(name="Ship the approval card").exists()


def test_a_reload_and_a_reconnect_show_the_card_and_approving_there_works(
    session: Session, workspace_chat: Chat, user: Any
) -> None:
    async def run() -> None:
        frames: list[str] = []
        async with session.socket(workspace_chat) as ws:
            await session.send(workspace_chat, CREATE)
            card = await until(ws, APPROVAL.search, frames)
        wanted = approval_id(card)
        # A reload: the page renders the waiting card from the turn's live state…
        page = await asyncio.to_thread(session.http.get, f"/chats/{workspace_chat.pk}/")
        assert approval_id(page.text) == wanted and 'data-approval-action="approve"' in page.text
        # …and another tab (a second session of the same user) answers it.
        other_tab = Session(session.stack, user)
        async with other_tab.socket(workspace_chat) as ws:
            synced = str(await asyncio.wait_for(ws.recv(), timeout=10))  # the reconnect's sync
            assert approval_id(synced) == wanted
            response = await other_tab.answer(wanted, decision="approve", always="1")
            assert response.status_code == 200
            again = await session.answer(wanted, decision="deny")
            assert again.status_code in (404, 409)  # answered already (or no longer waiting)
            await until(ws, finished, frames)

    asyncio.run(run())
    assert Task.objects.filter(name="Ship the approval card").count() == 1
    assert ChatToolAllowance.objects.filter(chat=workspace_chat, tool="create_task").exists()


def test_other_turns_keep_streaming_while_one_waits(session: Session, workspace_chat: Chat, demo_model: Any) -> None:
    other = Chat.objects.create(
        owner=workspace_chat.owner, model=demo_model, enabled_tools={"clock_math": ["calculate"]}
    )

    async def run() -> tuple[float, list[float]]:
        frames: list[str] = []
        async with session.socket(workspace_chat) as waiting, session.socket(other) as ws:
            await session.send(workspace_chat, CREATE)
            card = await until(waiting, APPROVAL.search, frames)
            started = time.monotonic()
            await session.send(other, "What is 12*7? Then tell me a long story.")
            arrivals: list[float] = []

            def heard(frame: str) -> bool:
                arrivals.append(time.monotonic())
                return finished(frame)

            await until(ws, heard, [])
            took = time.monotonic() - started
            # The first turn is still waiting, untouched.
            assert Turn.objects.get(chat=workspace_chat).status == Turn.Status.RUNNING
            await session.answer(approval_id(card), decision="deny")
            await until(waiting, finished, frames)
        return took, [b - a for a, b in itertools.pairwise(arrivals)]

    took, gaps = asyncio.run(run())
    assert Turn.objects.get(chat=other).status == Turn.Status.COMPLETED
    assert len(gaps) > 5 and took < 20
    # Nothing held the loop: no pause between fragments anywhere near a poll interval's worth.
    assert max(gaps) < 2.0, gaps


@pytest.fixture
def exa(user: Any) -> Iterator[FakeExa]:
    with FakeExa() as fake:
        ToolsetConfig.objects.update_or_create(toolset_id="exa", defaults={"settings": {"base_url": fake.base_url}})
        UserToolsetConfig.objects.create(user=user, toolset_id="exa", api_key=FAKE_API_KEY)
        yield fake


def test_an_identical_search_is_served_from_the_cache(
    session: Session, user: Any, demo_model: Any, exa: FakeExa
) -> None:
    chat = Chat.objects.create(owner=user, model=demo_model, enabled_tools={"exa": ["search"]})

    async def ask(text: str) -> list[str]:
        frames: list[str] = []
        async with session.socket(chat) as ws:
            await session.send(chat, text)
            await until(ws, finished, frames)
        return frames

    asyncio.run(ask("Search the web for django channels"))
    calls = len(exa.requests)
    frames = asyncio.run(ask("Search the web for django channels"))
    assert len(exa.requests) == calls  # Exa was not asked again
    first, hit = ToolExecution.objects.filter(tool="search").order_by("id")
    assert (first.cache_hit, hit.cache_hit) == (False, True)
    assert hit.cached_at == first.started_at and hit.result == first.result
    cards = [f for f in frames if "tool-call-message" in f]
    assert any('data-testid="tool-call-cached"' in f and "Cached result from" in f for f in cards), cards[-1][:3000]
    # The page shows it the same way after the fact.
    page = session.http.get(f"/chats/{chat.pk}/").text
    assert page.count('data-testid="tool-call-cached"') == 1
