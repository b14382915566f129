"""The chat's toolbox (chat/worker/tools.py): it offers only the selected tools of toolsets usable right
now, says which selected toolsets it skipped and why, runs a call at the place the loop gives it,
and sends progress to the callback it was built with."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from agent.types import ToolCall
from chat.models import Chat, Turn
from chat.worker.tools import TOOL_CALL_ID_LENGTH, ChatToolBox
from toolsets import availability, registry
from toolsets.availability import DISABLED_BY_ADMIN, DISABLED_BY_USER, NO_API_KEY
from toolsets.base import ToolContext, Toolset, tool
from toolsets.models import ToolExecution, ToolsetConfig, UserToolsetConfig

pytestmark = pytest.mark.django_db(transaction=True)


@tool()
def add(a: int, b: int = 1) -> dict[str, int]:
    """Add two numbers."""
    return {"sum": a + b}


@tool()
def halve(n: int) -> float:
    """Halve a number."""
    return n / 2


@tool()
def explode() -> str:
    """Always fails."""
    raise RuntimeError("disk on fire")


@tool()
def crunch(ctx: ToolContext) -> str:
    """Report progress from a worker thread while it works."""
    ctx.progress("warming up", 10)
    time.sleep(0.01)
    ctx.progress("almost there", 90.5)
    return "crunched"


@tool()
def where(ctx: ToolContext) -> dict[str, int | None]:
    """Say which turn and chat the call belongs to."""
    return {"turn": ctx.turn_id, "chat": ctx.chat_id, "user": ctx.user_id}


def make_toolsets() -> dict[str, Toolset]:
    return {
        "maths": Toolset(id="maths", name="Maths", description="", tools=[add, halve, explode, crunch, where]),
        "admin_off": Toolset(id="admin_off", name="Admin off", description="", tools=[add]),
        "user_off": Toolset(id="user_off", name="User off", description="", tools=[add]),
        "keyed": Toolset(id="keyed", name="Keyed", description="", tools=[add], needs_api_key=True),
        "unpicked": Toolset(id="unpicked", name="Unpicked", description="", tools=[add]),
    }


@pytest.fixture(autouse=True)
def toolsets(monkeypatch: pytest.MonkeyPatch) -> dict[str, Toolset]:
    found = make_toolsets()
    # The toolbox, availability and the executor's resolve() all see only these toolsets.
    monkeypatch.setattr("chat.worker.tools.all_toolsets", lambda: found)
    monkeypatch.setattr(availability, "all_toolsets", lambda: found)
    monkeypatch.setattr(registry, "all_toolsets", lambda: found)
    return found


@pytest.fixture
def turn_id(user: Any) -> int:
    chat = Chat.objects.create(owner=user)
    return Turn.objects.create(chat=chat, status=Turn.Status.RUNNING).pk


async def prepared(**kwargs: Any) -> ChatToolBox:
    box = ChatToolBox(**kwargs)
    await sync_to_async(box.prepare)()
    return box


def offered(box: ChatToolBox) -> list[str]:
    return [spec["function"]["name"] for spec in box.specs()]


def test_only_selected_tools_of_usable_toolsets_are_offered(user: Any) -> None:
    ToolsetConfig.objects.create(toolset_id="admin_off", enabled=False)
    UserToolsetConfig.objects.create(user=user, toolset_id="user_off", enabled=False)
    box = ChatToolBox(
        user_id=user.pk,
        turn_id=1,
        selection={"maths": ["add", "halve"], "admin_off": ["add"], "user_off": ["add"], "keyed": ["add"]},
    )

    box.prepare()

    assert offered(box) == ["toolset__maths__add", "toolset__maths__halve"]
    assert box.skipped == [
        f"Admin off ({DISABLED_BY_ADMIN})",
        f"User off ({DISABLED_BY_USER})",
        f"Keyed ({NO_API_KEY})",
    ]


def test_an_offered_tool_is_described_by_its_own_schema(user: Any, toolsets: dict[str, Toolset]) -> None:
    box = ChatToolBox(user_id=user.pk, turn_id=1, selection={"maths": ["add"]})
    box.prepare()

    [spec] = box.specs()

    assert spec == {
        "type": "function",
        "function": {"name": "toolset__maths__add", "description": add.description, "parameters": add.parameters},
    }
    assert spec["function"]["parameters"]["required"] == ["a"]


def test_a_toolset_becomes_usable_once_its_key_is_given(user: Any) -> None:
    box = ChatToolBox(user_id=user.pk, turn_id=1, selection={"keyed": ["add"]})
    box.prepare()
    assert offered(box) == [] and box.skipped == [f"Keyed ({NO_API_KEY})"]

    UserToolsetConfig.objects.create(user=user, toolset_id="keyed", api_key="key-123456789")
    box.prepare()  # once per turn: nothing from the last one is left over

    assert offered(box) == ["toolset__keyed__add"] and box.skipped == []


def test_nothing_selected_means_nothing_offered_or_skipped(user: Any) -> None:
    ToolsetConfig.objects.create(toolset_id="admin_off", enabled=False)
    box = ChatToolBox(user_id=user.pk, turn_id=1, selection={})
    box.prepare()

    assert (box.specs(), box.skipped) == ([], [])


async def test_a_call_is_recorded_at_the_place_the_loop_gives_it(user: Any, turn_id: int) -> None:
    box = await prepared(user_id=user.pk, turn_id=turn_id, selection={"maths": ["add"]})
    # The provider's id is the same for both calls (some servers send "call_0" every time).
    first = await box.run(ToolCall("call_0", "toolset__maths__add", '{"a": 2}'), 3, 1)
    second = await box.run(ToolCall("call_0", "toolset__maths__add", '{"a": 5, "b": 5}'), 4, 0)

    records = [await ToolExecution.objects.aget(pk=r.data["execution_id"]) for r in (first, second)]
    assert [(r.turn_id, r.step, r.position, r.tool_call_id, r.result) for r in records] == [
        (turn_id, 3, 1, "call_0", {"sum": 3}),
        (turn_id, 4, 0, "call_0", {"sum": 10}),
    ]
    assert {r.user_id for r in records} == {user.pk}
    assert (first.call_id, first.content, first.is_error) == ("call_0", '{"sum": 3}', False)
    assert first.data["result"] == {"sum": 3} and first.data["arguments"] == {"a": 2}


async def test_a_failing_tool_is_an_error_result(user: Any, turn_id: int) -> None:
    box = await prepared(user_id=user.pk, turn_id=turn_id, selection={"maths": ["explode"]})

    result = await box.run(ToolCall("c", "toolset__maths__explode", "{}"), 0, 0)

    assert result.is_error and result.content.startswith("Error (execution_error):")
    assert "disk on fire" in result.content
    assert result.data["error_type"] == "execution_error" and "result" not in result.data


async def test_arguments_the_model_sent_are_validated_as_sent(user: Any, turn_id: int) -> None:
    box = await prepared(user_id=user.pk, turn_id=turn_id, selection={"maths": ["add"]})

    result = await box.run(ToolCall("c", "toolset__maths__add", '{"a": 1,'), 0, 0)

    assert result.is_error and result.data["error_type"] == "validation_error"
    assert result.data["arguments"] == '{"a": 1,'  # what the model sent, for its card
    record = await ToolExecution.objects.aget(pk=result.data["execution_id"])
    assert record.raw_arguments == '{"a": 1,'


async def test_a_long_provider_id_is_cut_for_the_record_only(user: Any, turn_id: int) -> None:
    long_id = "call_" + "s" * 500  # Gemini's ids carry a signature
    box = await prepared(user_id=user.pk, turn_id=turn_id, selection={"maths": ["add"]})

    result = await box.run(ToolCall(long_id, "toolset__maths__add", '{"a": 1}'), 0, 0)

    assert result.call_id == long_id
    record = await ToolExecution.objects.aget(pk=result.data["execution_id"])
    assert record.tool_call_id == long_id[:TOOL_CALL_ID_LENGTH]


async def test_progress_goes_to_the_callback_with_the_calls_place(user: Any, turn_id: int) -> None:
    reports: list[tuple[int, int, str, float | None]] = []

    async def on_progress(step: int, position: int, text: str, percent: float | None) -> None:
        reports.append((step, position, text, percent))

    box = await prepared(
        user_id=user.pk,
        turn_id=turn_id,
        selection={"maths": ["crunch"]},
        on_progress=on_progress,
    )

    result = await box.run(ToolCall("c", "toolset__maths__crunch", "{}"), 2, 3)
    for _ in range(20):  # reports hop from the tool's thread onto this loop
        if len(reports) == 2:
            break
        await asyncio.sleep(0.01)

    assert result.content == "crunched"  # a text result reaches the model as it is
    assert reports == [(2, 3, "warming up", 10), (2, 3, "almost there", 90.5)]


async def test_progress_without_a_callback_is_dropped(user: Any, turn_id: int) -> None:
    box = await prepared(user_id=user.pk, turn_id=turn_id, selection={"maths": ["crunch"]})

    result = await box.run(ToolCall("c", "toolset__maths__crunch", "{}"), 0, 0)

    assert not result.is_error


def test_a_tool_whose_policy_is_deny_is_never_offered(user: Any, other_user: Any) -> None:
    from toolsets.models import ToolRule, UserToolPolicy

    ToolRule.objects.create(toolset_id="maths", tool="explode", policy="deny")
    UserToolPolicy.objects.create(user=user, toolset_id="maths", tool="halve", policy="deny")
    mine = ChatToolBox(user_id=user.pk, turn_id=1, selection={"maths": ["add", "halve", "explode"]})
    theirs = ChatToolBox(user_id=other_user.pk, turn_id=1, selection={"maths": ["add", "halve", "explode"]})
    mine.prepare()
    theirs.prepare()
    assert offered(mine) == ["toolset__maths__add"]
    assert offered(theirs) == ["toolset__maths__add", "toolset__maths__halve"]


async def test_a_tool_learns_its_turn_and_chat_from_the_toolbox(user: Any, turn_id: int) -> None:
    """Tools that work on "this chat" (the Files toolset) get the chat from the chat side,
    never by looking up the turn themselves."""
    turn = await Turn.objects.aget(pk=turn_id)
    box = await prepared(user_id=user.pk, turn_id=turn_id, chat_id=turn.chat_id, selection={"maths": ["where"]})

    result = await box.run(ToolCall("call_w", "toolset__maths__where", "{}"), 0, 0)

    assert result.data["result"] == {"turn": turn_id, "chat": turn.chat_id, "user": user.pk}


def test_toolsets_and_agents_share_one_availability_check(user: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Agents are usable through their toolsets: the toolbox decides both from one look at the
    toolsets' state, so a turn pays for it once."""
    calls: list[int] = []
    real = availability.for_user

    def counted(user_id: int, *args: Any) -> Any:
        calls.append(user_id)
        return real(user_id, *args)

    monkeypatch.setattr(availability, "for_user", counted)
    box = ChatToolBox(
        user_id=user.pk, turn_id=1, selection={"maths": ["add"], "agents": ["general"]}, delegator=object()
    )
    box.prepare()
    assert calls == [user.pk]
    assert "toolset__maths__add" in offered(box)
    assert "general" in {agent.id for agent in box.agents.values()}


async def test_only_offered_tools_run(user: Any, turn_id: int) -> None:
    """A call naming a tool that was not offered (selected but of another toolset, never selected,
    an agent not chosen, or made up) is refused and recorded; the tool never runs."""
    box = await prepared(user_id=user.pk, turn_id=turn_id, selection={"maths": ["add"], "unpicked": []})

    unselected = await box.run(ToolCall("c1", "toolset__maths__halve", '{"n": 4}'), 0, 0)
    other = await box.run(ToolCall("c2", "toolset__unpicked__add", '{"a": 1}'), 0, 1)
    agent = await box.run(ToolCall("c3", "delegate_to_general", '{"task": "x"}'), 0, 2)
    made_up = await box.run(ToolCall("c4", "toolset__maths__nope", "{}"), 0, 3)

    assert [r.data["error_type"] for r in (unselected, other, agent, made_up)] == [
        "permission_denied",
        "permission_denied",
        "unknown_tool",
        "unknown_tool",
    ]
    assert unselected.content == (
        "Error (permission_denied): Maths: Halve is not among the tools selected for this chat, so it was not run."
    )
    records = [r async for r in ToolExecution.objects.filter(turn_id=turn_id).order_by("position")]
    assert [(r.toolset, r.tool, r.status, r.result) for r in records] == [
        ("maths", "halve", "error", None),
        ("unpicked", "add", "error", None),
        ("", "delegate_to_general", "error", None),
        ("maths", "nope", "error", None),
    ]


async def test_a_subagents_toolbox_says_whose_tools_they_are(user: Any, turn_id: int) -> None:
    box = await prepared(user_id=user.pk, turn_id=turn_id, selection={"maths": ["add"]}, lane="0-0")

    result = await box.run(ToolCall("c", "toolset__maths__halve", '{"n": 4}'), 0, 0)

    assert "not among the tools given to this agent" in result.content


def test_toolsets_and_agents_limited_to_other_groups_are_not_offered(user: Any) -> None:
    """The agent loop's path: the turn offers neither a toolset nor an admin's agent limited to
    groups the owner is not in, says why, and offers them from the next turn on once they join."""
    from django.contrib.auth.models import Group

    from chat.models import AgentDefinition
    from core.groups import NOT_IN_GROUPS

    staff = Group.objects.create(name="staff")
    ToolsetConfig.objects.create(toolset_id="maths").groups.add(staff)
    agent = AgentDefinition.objects.create(slug="auditor", name="Auditor", description="d", instructions="i")
    agent.groups.add(staff)
    selection = {"maths": ["add"], "agents": ["auditor"]}

    box = ChatToolBox(user_id=user.pk, turn_id=1, selection=selection, delegator=object())
    box.prepare()
    assert offered(box) == []
    assert box.skipped == [f"Maths ({NOT_IN_GROUPS})", f"Auditor ({NOT_IN_GROUPS})"]

    user.groups.add(staff)
    box.prepare()
    assert offered(box) == ["toolset__maths__add", "delegate_to_auditor"] and box.skipped == []


async def test_a_call_to_a_toolset_limited_to_other_groups_is_refused(user: Any, turn_id: int) -> None:
    """Offered at the start of the turn, then the owner left the group: the call itself is
    checked again where it runs."""
    from django.contrib.auth.models import Group

    staff = await Group.objects.acreate(name="staff")
    config = await ToolsetConfig.objects.acreate(toolset_id="maths")
    await config.groups.aadd(staff)
    await user.groups.aadd(staff)
    # halve, not add: add is in every test toolset, and a tool belongs to the last one built.
    box = await prepared(user_id=user.pk, turn_id=turn_id, selection={"maths": ["halve"]})
    assert box.offered == {"toolset__maths__halve"}
    await user.groups.aremove(staff)

    result = await box.run(ToolCall("c", "toolset__maths__halve", '{"n": 4}'), 0, 0)

    assert result.is_error and result.content == "Error (permission_denied): Maths: Not available to your groups."
