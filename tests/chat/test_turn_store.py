"""Every database write of a running turn (chat/worker/turn_store.py): checkpoints of streamed text
that the final message replaces, closing a turn whose worker died without losing what it had
streamed, and the end of a turn."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from agent.types import AssistantMessage, ToolCall, ToolResult, Usage
from chat.live import LiveTurn
from chat.models import Chat, Message, TokenUsage, Turn
from chat.worker import turn_store
from toolsets.models import ToolExecution

pytestmark = pytest.mark.django_db


@pytest.fixture
def turn(user: Any, demo_model: Any) -> Turn:
    chat = Chat.objects.create(owner=user, model=demo_model)
    return Turn.objects.create(chat=chat, model=demo_model, status=Turn.Status.RUNNING)


def streaming(turn: Turn, *texts: str) -> LiveTurn:
    """The live state of `turn` with one step per text, each still streaming it."""
    state = LiveTurn(turn.pk, turn.chat_id)
    for index, text in enumerate(texts):
        state.start_step(index).text = text
    return state


def answers(turn: Turn) -> list[tuple[int | None, str, dict[str, Any]]]:
    rows = Message.objects.filter(turn=turn, role=Message.Role.ASSISTANT).order_by("step")
    return [(m.step, m.content, m.metadata) for m in rows]


def tool_messages(turn: Turn) -> list[tuple[str, str, dict[str, Any]]]:
    rows = Message.objects.filter(turn=turn, role=Message.Role.TOOL).order_by("id")
    return [(m.tool_call_id, m.content, m.metadata) for m in rows]


def call_message(turn: Turn, step: int, *ids: str) -> Message:
    calls = [ToolCall(call_id, "toolset__clock_math__calculate", '{"expression": "1+1"}') for call_id in ids]
    return Message.objects.create(
        chat_id=turn.chat_id,
        turn=turn,
        step=step,
        role=Message.Role.ASSISTANT,
        content="Let me check.",
        tool_calls=[c.to_openai() for c in calls],
    )


def execution(turn: Turn, step: int, position: int, status: str = "running") -> ToolExecution:
    return ToolExecution.objects.create(
        user_id=turn.chat.owner_id,
        turn=turn,
        step=step,
        position=position,
        tool_call_id=f"c{position}",
        toolset="clock_math",
        tool="calculate",
        status=status,
    )


# --- while the turn runs ------------------------------------------------------------------------


def test_a_checkpoint_keeps_the_text_streamed_so_far(turn: Turn) -> None:
    turn_store.checkpoint(turn.chat_id, turn.pk, streaming(turn, "Hel", "Wor").streaming_texts())
    turn_store.checkpoint(turn.chat_id, turn.pk, streaming(turn, "Hello", "World").streaming_texts())

    assert answers(turn) == [(0, "Hello", {"streaming": True}), (1, "World", {"streaming": True})]


def test_the_final_message_replaces_the_checkpoint_of_its_step(turn: Turn) -> None:
    turn_store.checkpoint(turn.chat_id, turn.pk, streaming(turn, "Let me").streaming_texts())
    call = ToolCall("c1", "toolset__clock_math__calculate", '{"expression": "6*7"}')
    message = AssistantMessage(
        content="Let me calculate.", tool_calls=[call], finish_reason="tool_calls", usage=Usage(12, 5)
    )

    turn_store.save_assistant(
        turn.chat_id, turn.pk, 0, message, "complete", html="<p>Let me calculate.</p>", html_key="k1"
    )

    [saved] = Message.objects.filter(turn=turn, role=Message.Role.ASSISTANT)
    assert (saved.step, saved.content, saved.metadata) == (0, "Let me calculate.", {})
    assert saved.tool_calls == [call.to_openai()]
    assert (saved.html, saved.html_key) == ("<p>Let me calculate.</p>", "k1")
    assert (saved.prompt_tokens, saved.completion_tokens, saved.finish_reason) == (12, 5, "tool_calls")


def test_a_stopped_answer_is_marked_so(turn: Turn) -> None:
    message = AssistantMessage(content="Partial")

    turn_store.save_assistant(turn.chat_id, turn.pk, 0, message, "stopped", html="", html_key="")

    assert answers(turn) == [(0, "Partial", {"stopped": True})]
    saved = Message.objects.get(turn=turn, role=Message.Role.ASSISTANT)
    assert saved.tool_calls is None and saved.prompt_tokens is None  # no usage reported: no figure


def test_usage_is_added_to_the_owners_total(turn: Turn) -> None:
    turn_store.record_usage(turn.chat.owner_id, AssistantMessage(usage=Usage(100, 20)))
    turn_store.record_usage(turn.chat.owner_id, AssistantMessage(usage=Usage(50, 10)))

    total = TokenUsage.objects.get(user_id=turn.chat.owner_id)
    assert (total.prompt_tokens, total.completion_tokens, total.model_calls) == (150, 30, 2)


def test_a_cancelled_result_cancels_the_execution_at_its_place(turn: Turn) -> None:
    running = [execution(turn, 0, 0), execution(turn, 0, 1)]
    cancelled = ToolResult("c1", "Error: cancelled by the user.", is_error=True, cancelled=True)

    turn_store.save_tool_result(turn.chat_id, turn.pk, 0, 1, "c1", cancelled)

    assert tool_messages(turn) == [("c1", "Error: cancelled by the user.", {"error": True})]
    statuses = [ToolExecution.objects.get(pk=e.pk).status for e in running]
    assert statuses == ["running", "cancelled"]


def test_a_result_recorded_again_replaces_the_first(turn: Turn) -> None:
    """The agent loop records a call's result again, as an error, when the first recording
    failed part way (agent/loop.py): one tool message per call, the last one."""
    turn_store.save_tool_result(turn.chat_id, turn.pk, 0, 0, "c1", ToolResult("c1", '{"ok": true}'))
    failed = ToolResult("c1", "Error: the tool ran, but its result could not be recorded", is_error=True)

    turn_store.save_tool_result(turn.chat_id, turn.pk, 0, 0, "c1", failed)

    assert tool_messages(turn) == [("c1", failed.content, {"error": True})]


def test_the_transcript_leaves_out_system_messages(turn: Turn) -> None:
    Message.objects.create(chat_id=turn.chat_id, turn=turn, role=Message.Role.USER, content="Hi")
    turn_store.save_system(turn.chat_id, turn.pk, 0, "Answer now without tools.")
    turn_store.save_assistant(turn.chat_id, turn.pk, 0, AssistantMessage("Hello!"), "complete", html="", html_key="")

    assert turn_store.transcript(turn.chat_id) == [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello!"},
    ]


@pytest.mark.parametrize("exchanges", [1, 12])
def test_a_turns_transcript_costs_the_same_queries_however_long_the_chat(
    turn: Turn, exchanges: int, django_assert_num_queries: Any
) -> None:
    """The transcript reads only the fields it sends: touching one left in the database would
    cost a query per message."""
    call = ToolCall(id="c1", name="clock_math__current_time", arguments="{}")
    for step in range(exchanges):
        Message.objects.create(chat_id=turn.chat_id, turn=turn, role=Message.Role.USER, content=f"Q{step}")
        turn_store.save_assistant(
            turn.chat_id, turn.pk, step, AssistantMessage("", [call]), "complete", html="<p>x</p>", html_key="k"
        )
        turn_store.save_tool_result(turn.chat_id, turn.pk, step, 0, "c1", ToolResult(call_id="c1", content="12:00"))

    with django_assert_num_queries(3):  # the branch, its messages, their files
        messages, notice = turn_store.turn_transcript(turn.chat_id, turn.pk, vision=False)

    assert len(messages) == 3 * exchanges and notice == ""
    assert messages[1] == {"role": "assistant", "content": None, "tool_calls": [call.to_openai()]}
    assert messages[2] == {"role": "tool", "content": "12:00", "tool_call_id": "c1"}


def test_a_first_turns_transcript_needs_no_read_of_the_branch(turn: Turn, django_assert_num_queries: Any) -> None:
    """A turn without a parent is its branch: the same transcript, without reading the chat's turns."""
    assert turn.parent_id is None
    Message.objects.create(chat_id=turn.chat_id, turn=turn, role=Message.Role.USER, content="Hello")
    Message.objects.create(chat_id=turn.chat_id, role=Message.Role.USER, content="Kept from before branches")
    Turn.objects.create(chat_id=turn.chat_id, parent=turn)  # a later turn is not in a first turn's branch
    Message.objects.create(chat_id=turn.chat_id, turn=Turn.objects.last(), role=Message.Role.USER, content="Later")

    with django_assert_num_queries(2):  # its messages, their files
        first = turn_store.turn_transcript(turn.chat_id, turn.pk, vision=False, first=True)

    assert first == turn_store.turn_transcript(turn.chat_id, turn.pk, vision=False)
    assert [m["content"] for m in first[0]] == ["Hello", "Kept from before branches"]


# --- the end --------------------------------------------------------------------------------------


def test_finish_closes_the_turn_with_its_outcome(turn: Turn) -> None:
    first_token = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)

    turn_store.finish(
        turn,
        Turn.Status.FAILED,
        iterations=2,
        error="The model provider is having trouble right now.",
        error_kind="unavailable",
        notices=["Tool limit reached"],
        prompt_tokens=30,
        completion_tokens=7,
        first_token_at=first_token.timestamp(),
    )

    stored = Turn.objects.get(pk=turn.pk)
    assert (stored.status, stored.iterations, stored.error_kind) == ("failed", 2, "unavailable")
    assert stored.error == "The model provider is having trouble right now."
    assert stored.notices == ["Tool limit reached"]
    assert stored.usage == {"prompt_tokens": 30, "completion_tokens": 7}
    assert stored.first_token_at == first_token
    assert stored.finished_at is not None
    assert turn.status == "failed"  # the instance the worker holds agrees


def test_finish_without_a_first_token_leaves_it_empty(turn: Turn) -> None:
    turn_store.finish(
        turn,
        Turn.Status.CANCELLED,
        iterations=0,
        error="",
        error_kind="",
        notices=[],
        prompt_tokens=0,
        completion_tokens=0,
        first_token_at=None,
    )

    stored = Turn.objects.get(pk=turn.pk)
    assert stored.status == "cancelled" and stored.first_token_at is None


def test_an_interrupted_turn_keeps_the_text_of_its_live_state(turn: Turn) -> None:
    state = streaming(turn, "First", "", "Third, half")

    assert turn_store.close_interrupted(turn.pk, state) is True

    assert answers(turn) == [(0, "First", {"stopped": True}), (2, "Third, half", {"stopped": True})]
    stored = Turn.objects.get(pk=turn.pk)
    assert stored.status == Turn.Status.INTERRUPTED
    assert (stored.error, stored.error_kind) == (turn_store.INTERRUPTED_ERROR, "interrupted")
    assert stored.finished_at is not None


def test_live_text_longer_than_the_checkpoint_wins(turn: Turn) -> None:
    turn_store.checkpoint(turn.chat_id, turn.pk, streaming(turn, "Hel").streaming_texts())

    turn_store.close_interrupted(turn.pk, streaming(turn, "Hello, wor"))

    assert answers(turn) == [(0, "Hello, wor", {"stopped": True})]


def test_a_finished_step_is_not_overwritten_by_live_text(turn: Turn) -> None:
    turn_store.save_assistant(turn.chat_id, turn.pk, 0, AssistantMessage("Done."), "complete", html="", html_key="")

    turn_store.close_interrupted(turn.pk, streaming(turn, "Done. And some more"))

    assert answers(turn) == [(0, "Done.", {})]


def test_without_live_state_the_checkpoints_are_kept_as_stopped_answers(turn: Turn) -> None:
    turn_store.checkpoint(turn.chat_id, turn.pk, streaming(turn, "Written before the crash").streaming_texts())

    assert turn_store.close_interrupted(turn.pk, None) is True

    assert answers(turn) == [(0, "Written before the crash", {"stopped": True})]


def test_every_open_tool_call_gets_a_result(turn: Turn) -> None:
    call_message(turn, 0, "a", "b")
    Message.objects.create(
        chat_id=turn.chat_id, turn=turn, step=0, role=Message.Role.TOOL, tool_call_id="a", content="2"
    )
    done, running = execution(turn, 0, 0, status="success"), execution(turn, 0, 1)

    turn_store.close_interrupted(turn.pk, None)

    assert tool_messages(turn) == [
        ("a", "2", {}),
        ("b", "Error: interrupted before this tool finished.", {"error": True}),
    ]
    assert ToolExecution.objects.get(pk=done.pk).status == "success"
    stopped = ToolExecution.objects.get(pk=running.pk)
    assert (stopped.status, stopped.error) == ("error", "Interrupted")
    assert stopped.finished_at is not None
    # What a provider is sent next is valid: each call answered once, right after its message.
    replay = [m["role"] for m in turn_store.transcript(turn.chat_id)]
    assert replay == ["assistant", "tool", "tool"]


def test_closing_an_interrupted_turn_again_changes_nothing(turn: Turn) -> None:
    call_message(turn, 0, "a")
    assert turn_store.close_interrupted(turn.pk, streaming(turn, "Let me check."))
    before = list(Message.objects.order_by("id").values_list("id", "content", "metadata"))
    closed_at = Turn.objects.get(pk=turn.pk).finished_at

    assert turn_store.close_interrupted(turn.pk, streaming(turn, "Let me check. Something else")) is False

    assert list(Message.objects.order_by("id").values_list("id", "content", "metadata")) == before
    assert Turn.objects.get(pk=turn.pk).finished_at == closed_at


@pytest.mark.parametrize("status", [Turn.Status.QUEUED, Turn.Status.COMPLETED, Turn.Status.CANCELLED])
def test_a_turn_that_is_not_running_is_not_interrupted(turn: Turn, status: str) -> None:
    Turn.objects.filter(pk=turn.pk).update(status=status)

    assert turn_store.close_interrupted(turn.pk, streaming(turn, "Late text")) is False

    assert Turn.objects.get(pk=turn.pk).status == status
    assert answers(turn) == []
