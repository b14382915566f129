"""run_python through the executor, as a chat's turn calls it, against the real stack's worker
(which consumes the sandbox queue): the chat's files at /data and only them, state kept between
calls, written files kept as the chat's files, the admin's switch, groups and policy."""

from __future__ import annotations

import time
from typing import Any

import pytest
from asgiref.sync import async_to_sync

from chat.models import Chat, Message, Turn
from sandbox import jail
from toolsets import executor
from toolsets.base import qualified_name
from toolsets.files.models import Attachment
from toolsets.models import ToolsetConfig

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(300),
    pytest.mark.skipif(bool(jail.missing()), reason=jail.missing() or "ok"),
]
NAME = qualified_name("code", "run_python")


@pytest.fixture
def enabled(db: Any) -> ToolsetConfig:
    config, _ = ToolsetConfig.objects.update_or_create(toolset_id="code", defaults={"enabled": True})
    return config


def _turn(user: Any, chat: Chat | None = None) -> Turn:
    chat = chat or Chat.objects.create(owner=user, enabled_tools={"code": ["run_python"]})
    turn = Turn.objects.create(chat=chat)
    Message.objects.create(chat=chat, turn=turn, role="user", content="run it")
    return turn


def run(user: Any, turn: Turn, code: str) -> executor.Execution:
    return async_to_sync(executor.execute)(
        NAME, {"code": code}, user_id=user.pk, tool_call_id="call_1", turn_id=turn.pk, chat_id=turn.chat_id
    )


def test_state_files_and_outputs(stack: Any, enabled: Any, user: Any, other_user: Any, attach_file: Any) -> None:
    theirs = attach_file(other_user, "theirs.csv", b"x,y\n9,9\n")
    mine = attach_file(user, "mine.csv", b"a,b\n1,2\n3,4\n")
    turn = _turn(user, Chat.objects.get(pk=mine.chat_id))
    first = run(
        user, turn, "import os, pandas as pd\ndf = pd.read_csv('/data/mine.csv')\nprint(sorted(os.listdir('/data')))"
    )
    assert first.ok, first.error
    assert first.result["ok"] and first.result["stdout"] == "['mine.csv']\n"
    assert theirs.name not in first.model_content(16_000)

    second = run(user, turn, "df['c'] = df.a + df.b\ndf.to_csv('sums.csv', index=False)\nprint(df.c.sum())")
    assert second.ok and second.result["stdout"] == "10\n"
    saved = second.result["files"]
    assert [f["name"] for f in saved] == ["sums.csv"]
    attachment = Attachment.objects.get(pk=saved[0]["id"])
    assert attachment.owner_id == user.pk and attachment.chat_id == turn.chat_id
    assert attachment.file.read() == b"a,b,c\n1,2,3\n3,4,7\n"
    assert f"as the chat's file #{attachment.pk}" in second.model_content(16_000)

    # The written file is one of the chat's files now: the next call reads it at /data.
    third = run(user, turn, "print(open('/data/sums.csv').read().splitlines()[-1])")
    assert third.ok and third.result["stdout"] == "3,4,7\n"


def test_a_code_error_is_a_result_the_model_reads(stack: Any, enabled: Any, user: Any) -> None:
    done = run(user, _turn(user), "print('before')\nraise ValueError('bad input')")
    assert done.ok  # the tool worked; the code failed
    assert done.result["ok"] is False and done.result["error"] == "ValueError: bad input"
    text = done.model_content(16_000)
    assert "stdout:\nbefore" in text and "The code failed: ValueError: bad input" in text


def test_off_until_an_admin_switches_it_on_and_limited_to_groups(stack: Any, user: Any) -> None:
    from django.contrib.auth.models import Group

    config, _ = ToolsetConfig.objects.update_or_create(toolset_id="code", defaults={"enabled": False})
    turn = _turn(user)
    done = run(user, turn, "print(1)")
    assert not done.ok and done.error is not None and done.error.type == "permission_denied"
    config.enabled = True
    config.save()
    config.groups.add(Group.objects.create(name="analysts"))
    done = run(user, turn, "print(1)")
    assert not done.ok and done.error is not None and done.error.type == "permission_denied"


def test_an_admin_policy_of_ask_holds_the_call_for_approval(stack: Any, enabled: Any, user: Any) -> None:
    enabled.policy = "ask"
    enabled.save()
    done = run(user, _turn(user), "print(1)")
    # No one to ask (no approver given): refused, never run.
    assert not done.ok and done.error is not None and done.error.type == "permission_denied"


def test_stop_ends_the_running_code_and_the_next_call_starts_afresh(stack: Any, enabled: Any, user: Any) -> None:
    import asyncio

    turn = _turn(user)
    assert run(user, turn, "kept = 1").ok

    async def stopped() -> None:
        call = asyncio.ensure_future(
            executor.execute(
                NAME,
                {"code": "import time\nprint('working', flush=True)\ntime.sleep(60)"},
                user_id=user.pk,
                tool_call_id="call_2",
                turn_id=turn.pk,
                chat_id=turn.chat_id,
            )
        )
        await asyncio.sleep(4)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call

    started = time.monotonic()
    async_to_sync(stopped)()
    again = run(user, turn, "print('kept' in globals())")
    # The worker stopped the code at once (not after its 60 s) and said why on the next call.
    assert time.monotonic() - started < 30
    assert again.ok and again.result["stdout"] == "False\n"
    assert again.result["notice"] == (
        "A new session started (the earlier one ended: Stopped). Variables from earlier calls are gone."
    )
