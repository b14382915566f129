"""A real Celery worker process on real Redis runs a turn; a real websocket client receives the
fragments; what was streamed matches what was stored."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import httpx
import pytest
import websockets
from django.conf import settings
from django.test import Client

from chat.models import Chat, Message, Turn
from chat.open_block import TailPatch
from chat.rendering import render_text
from chat.selection import default_selection
from toolsets.models import ToolExecution

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

SEQ = re.compile(r"^<!--seq (\d+) (\d+)-->")
APPEND = re.compile(r'<div hx-swap-oob="beforeend:#(blocks|tail)-(\d+-\d+)((?:>:last-child)*)">(.*?)</div>', re.S)
REPLACE_TAIL = re.compile(r'<div id="tail-(\d+-\d+)" class="md-tail" hx-swap-oob="true">(.*?)</div>', re.S)


def apply(frames: list[str]) -> tuple[dict[str, str], dict[str, str]]:
    """Replays the text fragments the way htmx applies them: blocks append, the tail appends
    (inside its last element) or is replaced."""
    blocks: dict[str, str] = {}
    tails: dict[str, str] = {}
    for frame in frames:
        body = SEQ.sub("", frame)
        for match in re.finditer(f"{APPEND.pattern}|{REPLACE_TAIL.pattern}", body, re.S):
            if match.group(1) == "blocks":
                blocks[match.group(2)] = blocks.get(match.group(2), "") + match.group(4)
            elif match.group(1) == "tail":
                # Text appended inside the growing block's last element (chat/open_block.py).
                depth = match.group(3).count(":last-child")
                tails[match.group(2)] = TailPatch(False, match.group(4), depth).apply(tails.get(match.group(2), ""))
            else:
                tails[match.group(5)] = match.group(6)
    return blocks, tails


def test_worker_turn_streams_to_websocket_and_matches_storage(stack: Any, user: Any, demo_model: Any) -> None:
    chat = Chat.objects.create(owner=user, model=demo_model, enabled_tools=default_selection())
    client = Client()
    client.force_login(user)
    cookies = {settings.SESSION_COOKIE_NAME: client.cookies[settings.SESSION_COOKIE_NAME].value}
    http = httpx.Client(base_url=stack.url, cookies=cookies)
    http.get(f"/chats/{chat.pk}/")
    csrf = http.cookies["csrftoken"]

    wire: dict[str, Any] = {"bytes": 0, "extensions": []}

    async def run() -> list[str]:
        header = "; ".join(f"{k}={v}" for k, v in {**cookies, "csrftoken": csrf}.items())
        async with websockets.connect(
            f"{stack.ws_url}/ws/chats/{chat.pk}/",
            additional_headers={"Cookie": header, "Origin": stack.url},
        ) as ws:
            wire["extensions"] = [e.name for e in ws.protocol.extensions]
            receive = ws.protocol.receive_data

            def counting(data: bytes | bytearray) -> None:
                wire["bytes"] += len(data)
                receive(data)

            ws.protocol.receive_data = counting  # type: ignore[method-assign]
            response = await asyncio.to_thread(
                http.post,
                f"/chats/{chat.pk}/messages/",
                data={"content": "What time is it in Tokyo, and what is 12*7?"},
                headers={"X-CSRFToken": csrf, "HX-Request": "true"},
            )
            assert response.status_code == 200, response.text
            frames = []
            while True:
                frame = await asyncio.wait_for(ws.recv(), timeout=30)
                frames.append(str(frame))
                if 'data-turn-status="completed"' in frame or 'data-turn-status="failed"' in frame:
                    return frames

    frames = asyncio.run(run())
    turn = Turn.objects.get(chat=chat)
    assert turn.status == Turn.Status.COMPLETED, turn.error
    # The web process compresses its frames (config/web.py), as it would for a browser.
    assert wire["extensions"] == ["permessage-deflate"]
    assert wire["bytes"] < sum(len(f.encode()) for f in frames) / 2

    seqs = [int(SEQ.match(f).group(2)) for f in frames]  # type: ignore[union-attr]
    assert seqs == list(range(1, len(seqs) + 1)), "fragments lost, duplicated or reordered"
    # Batching: far fewer socket messages than streamed tokens.
    final = Message.objects.filter(turn=turn, role="assistant").order_by("step").last()
    assert final is not None
    assert len(frames) < len(final.content.split()) + 12

    blocks, tails = apply(frames)
    key = f"{turn.pk}-{final.step}"
    assert blocks[key] == "".join(render_text(final.content, complete=True).blocks)
    assert tails[key] == ""

    messages = list(Message.objects.filter(chat=chat).order_by("id"))
    assert [m.role for m in messages] == ["user", "assistant", "tool", "tool", "assistant"]
    calls = messages[1].tool_calls or []
    assert [c["function"]["name"] for c in calls] == [
        "toolset__clock_math__current_time",
        "toolset__clock_math__calculate",
    ]
    assert json.loads(calls[1]["function"]["arguments"]) == {"expression": "12*7"}
    assert {m.tool_call_id for m in messages[2:4]} == {c["id"] for c in calls}
    assert "84" in final.content
    executions = ToolExecution.objects.filter(turn=turn).order_by("position")
    assert [(e.tool, e.status) for e in executions] == [("current_time", "success"), ("calculate", "success")]
    assert executions[1].result == {"expression": "12*7", "result": 84}
