"""The replay suite: recorded-style provider streams, served over HTTP by a local
OpenAI-compatible server, through the real LiteLLM seam, the real agent loop, the real tools and
the real persistence (`chat.worker.turns.run_turn`).

For every shape: each tool ran exactly once with the right arguments, every request the server
received was a valid transcript (every call answered once, JSON-object arguments, no merged
calls), what was stored is what was streamed, and the stored conversation is accepted by
LiteLLM's Anthropic and Gemini request transformations.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from django.test import Client

from agent.loop import LIMIT_MESSAGE
from agent.transcript import canonical
from agent.types import transcript_name
from chat import presenters
from chat.models import Chat, Message, TokenUsage, Turn
from chat.presenters import turn_views
from chat.worker.prompts import CONTINUE_PROMPT
from chat.worker.turn_store import transcript
from chat.worker.turns import run_turn
from toolsets.models import ToolExecution

from .checks import check_anthropic, check_gemini, check_openai, check_stored
from .replay import ReplayServer, Reply
from .shapes import CALC, SHAPES, SIX_SEVEN, Shape, answer, call, calls, finish, role, text

pytestmark = pytest.mark.django_db(transaction=True)

TOOLS = {"clock_math": ["calculate", "current_time"]}


def start_turn(user: Any, model: Any, content: str = "What is 6*7, and the time in Tokyo?", **chat: Any) -> Turn:
    chat_obj = Chat.objects.create(owner=user, model=model, enabled_tools=TOOLS, **chat)
    turn = Turn.objects.create(chat=chat_obj, model=model)
    Message.objects.create(chat=chat_obj, turn=turn, role="user", content=content)
    return turn


def run(turn: Turn) -> Turn:
    asyncio.run(asyncio.wait_for(run_turn(turn.pk), 60))
    turn.refresh_from_db()
    return turn


def tool_specs(replay: ReplayServer) -> list[dict[str, Any]]:
    for request in replay.requests:
        if request.body.get("tools"):
            return list(request.body["tools"])
    return []


@pytest.mark.parametrize("shape", SHAPES, ids=[s.name for s in SHAPES])
def test_stream_shape(shape: Shape, replay: ReplayServer, provider_model: Any, user: Any) -> None:
    replay.play(*shape.replies)
    turn = run(start_turn(user, provider_model, max_tool_iterations=shape.max_iterations))

    assert turn.status == shape.status, turn.error
    assert len(replay.requests) == (shape.requests or len(shape.replies))
    if shape.error:
        assert shape.error in turn.error

    # Tools: each exactly once, with the arguments the model sent, at its own place.
    executions = list(ToolExecution.objects.filter(turn=turn).order_by("step", "position"))
    ran = [
        (
            f"toolset__{e.toolset}__{e.tool}" if e.toolset else e.tool,
            e.arguments if e.error_type != "validation_error" else e.raw_arguments,
        )
        for e in executions
    ]
    assert ran == [(name, args) for name, args in shape.executions]
    assert [e.status if e.status == "success" else f"error:{e.error_type}" for e in executions] == shape.outcomes
    assert len({(e.step, e.position) for e in executions}) == len(executions)

    # Every request the provider received was a valid transcript; each follow-up carried the
    # calls of the step before it, unmerged, each answered once.
    for request in replay.requests:
        check_openai(request.messages)
        assert request.body["stream"] is True
        assert request.body.get("stream_options") == {"include_usage": True}
    sent_calls = [
        (c["function"]["name"], json.loads(c["function"]["arguments"]))
        for m in replay.requests[-1].messages
        if m["role"] == "assistant"
        for c in m.get("tool_calls") or []
    ]
    expected_calls = [
        (transcript_name(name), args if isinstance(args, dict) else {}) for name, args in shape.executions
    ]
    if turn.status == "completed" and shape.executions:
        assert sent_calls == expected_calls

    # What was stored: the messages of the turn, the final text, the notice.
    stored = list(Message.objects.filter(turn=turn).order_by("id"))
    assert [m.role for m in stored] == shape.roles
    answers = [m for m in stored if m.role == "assistant"]
    if shape.roles[-1] == "assistant":
        assert answers[-1].content == shape.final_text
    if shape.notice:
        assert any(shape.notice in n for n in turn.notices), turn.notices
    else:
        assert turn.notices == []
    if shape.finish_reason:
        assert answers[-1].finish_reason == shape.finish_reason

    # After a reload, every card finds its own execution (by place, not by provider id).
    views, _ = turn_views([turn])
    cards = [card for step in views[turn.pk]["steps"] for card in step["cards"]]
    assert [c["status"] for c in cards] == [o.split(":")[0] for o in shape.outcomes]

    # The stored conversation, as the next turn would send it, is valid for OpenAI, Anthropic
    # and Gemini.
    stored_transcript = transcript(turn.chat_id)
    check_stored(stored_transcript)
    replayed = [*canonical(stored_transcript), {"role": "user", "content": "And now?"}]
    check_openai(replayed)
    check_anthropic([{"role": "system", "content": "You are Tessera."}, *replayed], tool_specs(replay))
    check_gemini(replayed)


def test_follow_up_request_carries_split_parallel_calls_unmerged(
    replay: ReplayServer, provider_model: Any, user: Any
) -> None:
    shape = next(s for s in SHAPES if s.name == "openai_parallel_calls_with_split_arguments")
    replay.play(*shape.replies)
    run(start_turn(user, provider_model))
    follow_up = replay.requests[1].messages
    assistant, *results = follow_up[-3:]
    assert [c["id"] for c in assistant["tool_calls"]] == ["call_A1", "call_B2"]
    assert [json.loads(c["function"]["arguments"]) for c in assistant["tool_calls"]] == [
        SIX_SEVEN,
        {"timezone": "Asia/Tokyo"},
    ]
    assert sorted(r["tool_call_id"] for r in results) == ["call_A1", "call_B2"]
    assert json.loads(next(r["content"] for r in results if r["tool_call_id"] == "call_A1"))["result"] == 42


def test_invalid_arguments_keep_the_raw_text_for_the_reader(
    replay: ReplayServer, provider_model: Any, user: Any
) -> None:
    shape = next(s for s in SHAPES if s.name == "invalid_json_arguments")
    replay.play(*shape.replies)
    turn = run(start_turn(user, provider_model))
    bad = ToolExecution.objects.get(turn=turn, step=0)
    assert bad.raw_arguments == '{"expression": "6*7"'
    assert '{"expression": "6*7"' in bad.error  # shown on the error card, read by the model
    follow_up = replay.requests[1].messages
    assert follow_up[-2]["tool_calls"][0]["function"]["arguments"] == "{}"
    assert "not valid JSON" in follow_up[-1]["content"] and '"6*7"' in follow_up[-1]["content"]


def test_duplicate_ids_are_unique_in_the_transcript_and_cards_match_their_runs(
    replay: ReplayServer, provider_model: Any, user: Any
) -> None:
    shape = next(s for s in SHAPES if s.name == "duplicate_ids_in_one_step_and_across_steps")
    replay.play(*shape.replies)
    turn = run(start_turn(user, provider_model))
    ids = [c["id"] for m in replay.requests[-1].messages if m["role"] == "assistant" for c in m.get("tool_calls") or []]
    assert ids[0] == "call_1" and len(set(ids)) == 3  # the provider's id kept where it is unique
    views, _ = turn_views([turn])
    cards = [c for s in views[turn.pk]["steps"] for c in s["cards"]]
    assert all(c["status"] == "success" for c in cards)
    # Two calls that shared an id show their own results, not one result twice.
    assert [c["name"] for c in cards] == [CALC, "toolset__clock_math__current_time", CALC]
    assert "42" in cards[0]["result"] and "Asia/Tokyo" in cards[1]["result"]


def test_usage_is_recorded_per_call_per_turn_and_per_user(replay: ReplayServer, provider_model: Any, user: Any) -> None:
    shape = next(s for s in SHAPES if s.name == "final_usage_chunk")
    replay.play(*shape.replies)
    turn = run(start_turn(user, provider_model))
    answers = list(Message.objects.filter(turn=turn, role="assistant").order_by("step"))
    assert [(m.prompt_tokens, m.completion_tokens) for m in answers] == [(210, 18), (260, 4)]
    assert turn.usage == {"prompt_tokens": 470, "completion_tokens": 22}
    ledger = TokenUsage.objects.get(user=user)
    assert (ledger.prompt_tokens, ledger.completion_tokens, ledger.model_calls) == (470, 22, 2)
    view = presenters.turn_from_db(turn, answers, [])
    assert view["usage"]["text"] == "492 tokens"


def test_reasoning_is_neither_shown_nor_stored_nor_sent_back(
    replay: ReplayServer, provider_model: Any, user: Any
) -> None:
    shape = next(s for s in SHAPES if s.name == "reasoning_before_the_answer")
    replay.play(*shape.replies)
    turn = run(start_turn(user, provider_model))
    stored = " ".join(m.content for m in Message.objects.filter(turn=turn))
    assert "wants" not in stored and "Now I can" not in stored
    assert "reasoning_content" not in json.dumps(replay.requests[1].body)


def test_rate_limit_waits_for_retry_after(replay: ReplayServer, provider_model: Any, user: Any) -> None:
    replay.play(
        Reply(status=429, headers={"Retry-After": "1"}, error={"error": {"message": "Rate limit"}}),
        answer("Made it."),
    )
    turn = run(start_turn(user, provider_model))
    assert turn.status == "completed"
    first, second = replay.requests
    assert second.at - first.at >= 0.95


def test_rate_limit_asking_for_too_long_a_wait_fails_at_once(
    replay: ReplayServer, provider_model: Any, user: Any
) -> None:
    replay.play(Reply(status=429, headers={"Retry-After": "86400"}, error={"error": {"message": "Daily quota"}}))
    turn = run(start_turn(user, provider_model))
    assert turn.status == "failed" and turn.error_kind == "rate_limited"
    assert len(replay.requests) == 1


def test_length_offers_continue_which_carries_the_answer_on(
    replay: ReplayServer, provider_model: Any, user: Any, other_user: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # This test runs the continued turn itself: a worker of the session's stack must not take it.
    monkeypatch.setattr("chat.tasks.run_turn.apply_async", lambda *args, **kwargs: None)
    replay.play(answer("The first half of a long", reason="length"))
    turn = run(start_turn(user, provider_model))
    views, _ = turn_views([turn])
    assert views[turn.pk]["can_continue"]

    stranger = Client()
    stranger.force_login(other_user)
    assert stranger.post(f"/turns/{turn.pk}/continue/").status_code == 404
    owner = Client()
    owner.force_login(user)
    assert owner.get(f"/turns/{turn.pk}/continue/").status_code == 405

    response = owner.post(f"/turns/{turn.pk}/continue/", HTTP_HX_REQUEST="true")
    assert response.status_code == 200, response.content
    assert f'id="continue-{turn.pk}" hx-swap-oob="true"></div>' in response.content.decode()
    follow = Turn.objects.exclude(pk=turn.pk).get()
    # A second click while the new turn is queued or running is refused.
    assert owner.post(f"/turns/{turn.pk}/continue/").status_code == 409

    replay.play(answer("answer, now complete."))
    follow = run(follow)
    assert follow.status == "completed"
    sent = replay.requests[0].messages
    assert sent[-2] == {"role": "assistant", "content": "The first half of a long"}
    assert sent[-1] == {"role": "user", "content": CONTINUE_PROMPT}
    # The continued answer is no longer the latest: it cannot be continued twice.
    assert owner.post(f"/turns/{turn.pk}/continue/").status_code == 409


def test_continue_is_refused_for_an_answer_that_was_not_cut(
    replay: ReplayServer, provider_model: Any, user: Any
) -> None:
    replay.play(answer("Complete."))
    turn = run(start_turn(user, provider_model))
    client = Client()
    client.force_login(user)
    assert client.post(f"/turns/{turn.pk}/continue/").status_code == 400
    assert Turn.objects.count() == 1


def test_the_iteration_limit_is_told_to_the_model(replay: ReplayServer, provider_model: Any, user: Any) -> None:
    replay.play(Reply([calls(call(0, "call_loop", CALC, json.dumps(SIX_SEVEN))), finish("tool_calls")]))
    run(start_turn(user, provider_model, max_tool_iterations=2))
    last = replay.requests[-1].body
    assert "tools" not in last
    assert {"role": "system", "content": LIMIT_MESSAGE} in last["messages"]


def test_a_later_turn_replays_the_earlier_ones_validly(replay: ReplayServer, provider_model: Any, user: Any) -> None:
    """Two turns whose providers reuse "call_0": the second turn's request holds both turns'
    calls, each id once."""
    replay.play(Reply([calls(call(0, "call_0", CALC, json.dumps(SIX_SEVEN))), finish("tool_calls")]), answer("42."))
    first = run(start_turn(user, provider_model))
    turn = Turn.objects.create(chat=first.chat, model=provider_model)
    Message.objects.create(chat=first.chat, turn=turn, role="user", content="Again?")
    replay.play(
        Reply([calls(call(0, "call_0", CALC, json.dumps(SIX_SEVEN))), finish("tool_calls")]), answer("42 again.")
    )
    run(turn)
    check_openai(replay.requests[-1].messages)
    ids = [c["id"] for m in replay.requests[-1].messages if m["role"] == "assistant" for c in m.get("tool_calls") or []]
    assert len(ids) == 2 and ids[0] == "call_0" and ids[1] != "call_0"


def test_usage_chunk_fields_a_server_leaves_out_do_not_break_the_turn(
    replay: ReplayServer, provider_model: Any, user: Any
) -> None:
    replay.play(Reply([role(), text("Hi."), finish("stop"), {"choices": [], "usage": {"prompt_tokens": None}}]))
    turn = run(start_turn(user, provider_model))
    assert turn.status == "completed" and Message.objects.get(turn=turn, role="assistant").prompt_tokens is None
