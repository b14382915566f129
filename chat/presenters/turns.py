"""A turn's view: its steps, notices, usage and sources — from its LiveTurn while it runs, from
the database once it has ended."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from django.urls import reverse

from agent.catalogue import FIND_TOOL
from agent.context import READ_TOOL
from chat import citations, dom
from chat.spend import usage
from chat.worker import fair_share

from ..citations import Citations
from ..events import FINAL_SEQ
from ..live import LiveTurn
from ..models import Message, Turn
from ..rendering import fingerprint, render_complete, render_open, render_text
from .cards import card, card_from_execution


def with_lane(
    card_view: dict[str, Any], turn_id: int, lane_steps: dict[str, list[dict[str, Any]]], cite: Citations | None = None
) -> dict[str, Any]:
    """A delegation card, ready to render: its subagent's steps and its result."""
    found = card_view.get("delegation")
    if not found:
        return card_view
    lane = found.get("lane", "")
    view = dict(found)
    view["prefix"] = dom.lane(turn_id, lane)
    view["steps"] = lane_steps.get(lane, [])
    view["result_html"] = citations.link(render_complete(found["result"]), cite) if found.get("result") else ""
    return {**card_view, "delegation": view}


def _depth_first(lane: str) -> tuple[int, str]:
    """Deeper lanes sort first ("" is the turn's own steps, "0-1" one level down…)."""
    return (-(lane.count("/") + 1 if lane else 0), lane)


def live_lane_steps(live: LiveTurn) -> dict[str, list[dict[str, Any]]]:
    """Step views of every subagent lane of a live turn, inner lanes first so outer cards can
    show them."""
    views: dict[str, list[dict[str, Any]]] = {}
    cite = citations.by_number(live.sources, live.id)
    for lane in sorted(live.lanes, key=_depth_first):
        prefix = dom.lane(live.id, lane)
        views[lane] = [
            step(
                prefix,
                s.index,
                text=s.text,
                cards=[with_lane(c, live.id, views, cite) for c in s.cards],
                state=s.state,
                cite=cite,
            )
            for s in live.lanes[lane]
        ]
    return views


def step(
    turn_id: int | str,
    index: int,
    *,
    text: str,
    cards: list[dict[str, Any]],
    state: str,
    html: str | None = None,
    cite: Citations | None = None,
    steered: list[str] | None = None,
) -> dict[str, Any]:
    """`state`: streaming | complete | stopped | failed. `html`: the finished text, already
    rendered (a stored message). `cite`: the turn's sources, to link the text's [n] to.
    `steered`: the person's guidance read before this call."""
    if html is not None and state != "streaming":
        blocks, tail, tail_html = [html], "", ""
    else:
        rendered = render_text(text, complete=state != "streaming")
        blocks, tail, tail_html = rendered.blocks, rendered.tail, rendered.tail_html
        if tail and not tail_html:
            # The block still being written shows rendered, as the live page has it (chat/open_block.py).
            tail_html = render_open(tail)[0]
    if cite:
        blocks = [citations.link(block, cite) for block in blocks]
    return {
        "turn_id": turn_id,
        "index": index,
        "cards": cards,
        "blocks": blocks,
        "tail": tail,
        "tail_html": tail_html,
        "state": state,
        "has_text": bool(text.strip()),
        "steered": steered or [],
    }


def turn(
    turn_id: int,
    *,
    status: str,
    steps: list[dict[str, Any]],
    notices: Iterable[str | dict[str, str]] = (),
    error: str = "",
    seq: int = 0,
    finish_reason: str | None = None,
    usage_view: dict[str, Any] | None = None,
    sources: Iterable[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """`finish_reason`: why the turn's last model call ended; "length" on a completed turn
    offers to continue the answer."""
    can_continue = status == "completed" and finish_reason == "length"
    return {
        "id": turn_id,
        "status": status,
        "active": status in ("queued", "running"),
        "steps": steps,
        "notices": list(notices),
        "error": error,
        "seq": seq,
        "can_continue": can_continue,
        "continue_url": reverse("chat:continue", args=[turn_id]) if can_continue else "",
        "usage": usage_view if status not in ("queued", "running") else None,
        "sources": citations.source_views(turn_id, sources),
    }


def turn_from_live(live: LiveTurn) -> dict[str, Any]:
    """A running turn's live state → turn view."""
    lanes = live_lane_steps(live)
    cite = citations.by_number(live.sources, live.id)
    steps = [
        step(
            live.id,
            s.index,
            text=s.text,
            cards=[with_lane(c, live.id, lanes, cite) for c in s.cards],
            state=s.state,
            cite=cite,
            steered=s.steered,
        )
        for s in live.steps
    ]
    calls: list[tuple[int, int | None, int | None]] = [
        (s.index, s.usage[0], s.usage[1]) for s in live.steps if s.usage and len(s.usage) == 2
    ]
    return turn(
        live.id,
        status=live.status,
        steps=steps,
        notices=live.notices,
        error=live.error,
        seq=live.seq,
        finish_reason=live.finish_reason,
        usage_view=usage.view(live.usage, calls),
        sources=live.sources,
    )


def turn_from_db(turn_obj: Any, messages: list[Any], executions: list[Any]) -> dict[str, Any]:
    """A stored turn → turn view. `messages` are the turn's messages, `executions` its tool runs
    (subagents' included: their lane says which delegation card they belong to)."""
    # Keyed by place, not call id: some providers reuse ids such as "call_0" across steps.
    by_place: dict[tuple[str, int | None, int | None], Any] = {(e.lane, e.step, e.position): e for e in executions}
    # The loop's own tools (read_tool_result, find_tools) leave no execution record: their
    # stored result says how they ended.
    results = {(m.lane, m.step, m.tool_call_id): m.content for m in messages if m.role == "tool"}
    by_lane: dict[str, list[Any]] = defaultdict(list)
    for message in messages:
        if message.role == "assistant":
            by_lane[message.lane].append(message)
    lane_steps: dict[str, list[dict[str, Any]]] = {}
    sources = citations.from_executions(executions)
    cite = citations.by_number(sources, turn_obj.pk)
    # Inner lanes first: a subagent's card inside another subagent's needs its steps ready.
    for lane in sorted(by_lane, key=_depth_first):
        prefix = dom.lane(turn_obj.pk, lane)
        lane_steps[lane] = [
            _stored_step(turn_obj.pk, prefix, lane, m, by_place, lane_steps, cite, results) for m in by_lane[lane]
        ]
    steps = lane_steps.get("", [])
    answers = [m for m in messages if m.role == "assistant" and not m.lane]
    calls = [(m.step or 0, m.prompt_tokens, m.completion_tokens) for m in answers]
    return turn(
        turn_obj.pk,
        status=turn_obj.status,
        steps=steps,
        notices=turn_obj.notices,
        error=turn_obj.error,
        # A finished turn is final: the page drops any late fragment of it, and asks no sync
        # for it when a new exchange arrives (static/js/chat.js syncs turns still at 0).
        seq=0 if turn_obj.is_active else FINAL_SEQ,
        finish_reason=answers[-1].finish_reason if answers else None,
        usage_view=usage.view(turn_obj.usage, calls),
        sources=sources,
    )


def _stored_step(
    turn_id: int,
    prefix: str,
    lane: str,
    message: Any,
    by_place: dict[tuple[str, int | None, int | None], Any],
    lane_steps: dict[str, list[dict[str, Any]]],
    cite: Citations,
    results: dict[tuple[str, int | None, str], str],
) -> dict[str, Any]:
    cards = []
    for position, call in enumerate(message.tool_calls or []):
        execution = by_place.get((lane, message.step, position))
        function = call.get("function", {})
        if execution is None and function.get("name") in BUILT_IN_TOOLS:
            stored = results.get((lane, message.step, str(call.get("id", ""))))
            found = _built_in_card(prefix, message.step or 0, position, function, call, stored)
        else:
            found = card_from_execution(prefix, message.step or 0, position, function, call, execution)
        cards.append(with_lane(found, turn_id, lane_steps, cite))
    meta = message.metadata or {}
    state = "stopped" if meta.get("stopped") else "failed" if meta.get("failed") else "complete"
    html = message.html if message.html_key == fingerprint() else None
    return step(prefix, message.step or 0, text=message.content, cards=cards, state=state, html=html, cite=cite)


def _built_in_card(
    prefix: str,
    step_index: int,
    position: int,
    function: dict[str, Any],
    call: dict[str, Any],
    stored: str | None,
) -> dict[str, Any]:
    content = stored or ""
    failed = stored is None or content.startswith("Error")
    return card(
        prefix,
        step_index,
        position,
        name=str(function.get("name", "")),
        call_id=str(call.get("id", "")),
        arguments=function.get("arguments"),
        status="error" if failed else "success",
        result=None if failed else content.split("\n", 1)[0],
        error=content.removeprefix("Error: ") if failed else "",
    )


BUILT_IN_TOOLS = frozenset({READ_TOOL, FIND_TOOL})


# --- Turns for a page -------------------------------------------------------------------------


def turn_views(turns: Sequence[Turn]) -> tuple[dict[int, dict[str, Any]], dict[int, Message]]:
    """Turn views for many turns in a fixed number of queries (no per-turn lookups), and each
    turn's user message. Running turns show their live state; nothing here changes a turn."""
    from toolsets.files.templatetags import files
    from toolsets.models import ToolExecution

    ids = [t.pk for t in turns]
    messages: dict[int, list[Message]] = defaultdict(list)
    asked: dict[int, Message] = {}
    steered: dict[int, list[Message]] = defaultdict(list)
    stale = []
    roles = (Message.Role.USER, Message.Role.ASSISTANT)
    for m in files.with_file_flag(Message.objects.filter(turn_id__in=ids, role__in=roles)).order_by("id"):
        if m.role == Message.Role.USER:
            if (m.metadata or {}).get("steered") and not m.lane:
                steered[m.turn_id].append(m)  # type: ignore[index]
            elif not m.lane:  # a subagent's task is shown in its card, not as the user's message
                asked.setdefault(m.turn_id, m)  # type: ignore[arg-type]
            continue
        messages[m.turn_id].append(m)  # type: ignore[index]
        if m.html_key != fingerprint():
            m.html, m.html_key = render_complete(m.content), fingerprint()
            stale.append(m)
    files.prefetch(list(asked.values()))
    if stale:
        # A cache of the rendered text, stored once so the next view renders no Markdown at all.
        Message.objects.bulk_update(stale, ["html", "html_key"], batch_size=200)
    # The results of the loop's own tools, for their cards (only theirs: results can be large).
    built_in = [
        str(call.get("id", ""))
        for found in messages.values()
        for m in found
        for call in m.tool_calls or []
        if call.get("function", {}).get("name") in BUILT_IN_TOOLS
    ]
    if built_in:
        results = Message.objects.filter(turn_id__in=ids, role=Message.Role.TOOL, tool_call_id__in=built_in)
        for r in results.only("turn_id", "lane", "step", "role", "tool_call_id", "content"):
            messages[r.turn_id].append(r)  # type: ignore[index]
    executions: dict[int, list[Any]] = defaultdict(list)
    for e in ToolExecution.objects.filter(turn_id__in=ids).defer("raw_arguments"):
        executions[e.turn_id].append(e)  # type: ignore[index]
    views = {}
    # Turns waiting behind their owner's other turns say so (chat/worker/fair_share.py): one Redis read.
    notes = fair_share.notes(t.pk for t in turns if t.status == Turn.Status.QUEUED)
    for t in turns:
        live = LiveTurn.load(t.pk) if t.is_active else None
        views[t.pk] = turn_from_live(live) if live else turn_from_db(t, messages[t.pk], executions[t.pk])
        if t.pk in notes and not live:
            views[t.pk]["queued_note"] = notes[t.pk]
        if not live and steered.get(t.pk):
            _place_steered(t.pk, views[t.pk]["steps"], steered[t.pk])
    return views, asked


def _place_steered(turn_id: int, steps: list[dict[str, Any]], messages: list[Message]) -> None:
    """Shows each piece of guidance at the model call that read it (the first step from its
    own on: a step that never started, when Stop came right after, leaves it to the next)."""
    for m in messages:
        at = m.step or 0
        target = next((s for s in steps if s["index"] >= at), None)
        if target is None:
            target = step(turn_id, at, text="", cards=[], state="complete")
            steps.append(target)
        target["steered"] = [*target["steered"], m.content]


def stored_turn_view(turn_id: int) -> dict[str, Any] | None:
    """One turn as the database has it (a finished turn, or one whose live state is gone)."""
    found = Turn.objects.filter(pk=turn_id).first()
    return turn_views([found])[0][found.pk] if found else None


def exchange(turn_id: int, question: Message | None, view: dict[str, Any], found: Any = None) -> dict[str, Any]:
    """One exchange as the page shows it: the question, the answer (a turn view), and where it
    stands among the versions of that exchange (`found`: its `chat.branches.Versions`)."""
    from ..branches import as_view

    return {"turn_id": turn_id, "user_message": question, "turn": view, "versions": as_view(found)}
