"""Everything the chat shows of a turn, for the page and for the socket alike.

View models (the plain dicts the partials render) are built from the database for a finished
turn and from its `LiveTurn` for a running one; fragments (what the worker pushes) render the
very same partials. The page, a reconnect and the live stream therefore show the same thing.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from functools import cache
from typing import Any

from django.template import Context, Template
from django.template.loader import get_template
from django.urls import reverse

from toolsets.availability import DISABLED_BY_ADMIN
from toolsets.base import humanize, split_qualified_name
from toolsets.registry import get_toolset, resolve

from . import citations, dom, summaries, tool_content, usage
from .agents.base import DELEGATE_PREFIX
from .agents.registry import builtin_agents
from .citations import Citations
from .live import LiveTurn
from .models import Message, Turn
from .rendering import RenderedText, fingerprint, render_complete, render_text, tail_patch

RESULT_DISPLAY_LIMIT = 20_000
STATUS_LABELS = {
    "pending": "Calling...",
    "calling": "Calling...",
    "success": "Completed",
    "error": "Error",
    "cancelled": "Stopped",
}


def tool_display_name(name: str) -> str:
    """ "Exa: Search"; for a tool nobody registered, a readable name derived from its own."""
    if name.startswith(DELEGATE_PREFIX):
        # A subagent: its name (an admin's agent is named by its slug until its card starts).
        agent = builtin_agents().get(name.removeprefix(DELEGATE_PREFIX))
        return agent.name if agent else humanize(name.removeprefix(DELEGATE_PREFIX))
    found = resolve(name)
    if found:
        toolset, tool = found
        return f"{toolset.label}: {tool.display_name}"
    parts = split_qualified_name(name)
    if parts:
        known = get_toolset(parts[0])
        return f"{known.label if known else humanize(parts[0])}: {humanize(parts[1])}"
    return humanize(name) or "Tool"


def _connect(name: str, error_type: str, error: str) -> tuple[str, str]:
    """The "Connect <toolset>" action on an error card whose toolset the user must set up."""
    parts = split_qualified_name(name)
    toolset = get_toolset(parts[0]) if parts else None
    if toolset is None or error_type != "permission_denied" or DISABLED_BY_ADMIN in error:
        return "", ""
    return reverse("toolsets:settings") + f"#toolset-{toolset.id}", f"Connect {toolset.label}"


def pretty_json(value: Any) -> str:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except (json.JSONDecodeError, ValueError):
            return value
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def card(
    turn_id: int | str,
    step: int,
    position: int,
    *,
    name: str,
    call_id: str = "",
    arguments: Any = None,
    status: str = "pending",
    result: Any = None,
    error: str = "",
    error_type: str = "",
    duration_ms: int | None = None,
    progress_text: str = "",
    progress_percent: float | None = None,
    execution_id: int | None = None,
    delegation: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A tool card's view. `turn_id` is the id prefix of the steps it belongs to (a turn's id,
    or a subagent's lane prefix, see chat.dom.lane)."""
    found = resolve(name)
    tool = found[1] if found else None
    display_name = tool_display_name(name)
    result_text = "" if result is None else pretty_json(result)
    truncated = len(result_text) > RESULT_DISPLAY_LIMIT
    if status in ("pending", "calling"):
        summary = progress_text or summaries.status_text(tool, display_name, arguments if status == "calling" else None)
    elif status == "success":
        summary = summaries.summarize(tool, result)
    else:
        summary = summaries.summarize_error(error) if error else "Stopped"
    connect_url, connect_label = _connect(name, error_type, error) if status == "error" else ("", "")
    if delegation:
        # A subagent's card: its agent's name, and what it is doing or did.
        display_name, summary = delegation.get("name") or display_name, delegation.get("message") or summary
    return {
        "dom_id": dom.card(turn_id, step, position),
        "name": name,
        "call_id": call_id,
        "display_name": display_name,
        "status": status,
        "status_label": STATUS_LABELS.get(status, status),
        "summary": summary,
        "arguments": "" if arguments in (None, "") else pretty_json(arguments),
        "result": result_text[:RESULT_DISPLAY_LIMIT],
        # Content blocks (MCP tools) render by type instead of as JSON.
        "content_html": tool_content.render(result) if result is not None else None,
        "result_truncated": truncated,
        "full_result_url": reverse("toolsets:execution", args=[execution_id]) if truncated and execution_id else "",
        "error": error,
        "error_type": error_type,
        "duration_ms": duration_ms,
        "progress_percent": None if progress_percent is None else max(0, min(100, round(progress_percent))),
        "connect_url": connect_url,
        "connect_label": connect_label,
        "delegation": delegation,
    }


def delegation(
    agent_id: str, name: str, lane: str, *, task: str, context: str, state: str = "working", result: str = ""
) -> dict[str, Any]:
    """What a delegation card keeps (live, and in its execution's result): the agent, its lane
    (the path of the call), the task, and — once done — how it ended and what it answered."""
    messages = {
        "working": f"{name} is working on it…",
        "done": f"{name} finished.",
        "failed": f"{name} could not finish.",
        "stopped": f"{name} was stopped.",
    }
    return {
        "agent": agent_id,
        "name": name,
        "lane": lane,
        "task": task,
        "context": context,
        "state": state,
        "message": messages.get(state, messages["working"]),
        "result": result,
    }


def _with_lane(
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


def _live_lane_steps(live: LiveTurn) -> dict[str, list[dict[str, Any]]]:
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
                cards=[_with_lane(c, live.id, views, cite) for c in s.cards],
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
) -> dict[str, Any]:
    """`state`: streaming | complete | stopped | failed. `html`: the finished text, already
    rendered (a stored message). `cite`: the turn's sources, to link the text's [n] to."""
    if html is not None and state != "streaming":
        blocks, tail, tail_html = [html], "", ""
    else:
        rendered = render_text(text, complete=state != "streaming")
        blocks, tail, tail_html = rendered.blocks, rendered.tail, rendered.tail_html
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
    }


def turn(
    turn_id: int,
    *,
    status: str,
    steps: list[dict[str, Any]],
    notices: Iterable[str] = (),
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
    lanes = _live_lane_steps(live)
    cite = citations.by_number(live.sources, live.id)
    steps = [
        step(
            live.id,
            s.index,
            text=s.text,
            cards=[_with_lane(c, live.id, lanes, cite) for c in s.cards],
            state=s.state,
            cite=cite,
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
            _stored_step(turn_obj.pk, prefix, lane, m, by_place, lane_steps, cite) for m in by_lane[lane]
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
) -> dict[str, Any]:
    cards = []
    for position, call in enumerate(message.tool_calls or []):
        execution = by_place.get((lane, message.step, position))
        found = card_from_execution(prefix, message.step or 0, position, call.get("function", {}), call, execution)
        cards.append(_with_lane(found, turn_id, lane_steps, cite))
    meta = message.metadata or {}
    state = "stopped" if meta.get("stopped") else "failed" if meta.get("failed") else "complete"
    html = message.html if message.html_key == fingerprint() else None
    return step(prefix, message.step or 0, text=message.content, cards=cards, state=state, html=html, cite=cite)


def card_from_execution(
    turn_id: int | str,
    step_index: int,
    position: int,
    function: dict[str, Any],
    call: dict[str, Any],
    execution: Any,
) -> dict[str, Any]:
    name = function.get("name", "")
    if execution is None:
        # The call was stored but never ran (e.g. the worker died): say so rather than hide it.
        return card(
            turn_id,
            step_index,
            position,
            name=name,
            call_id=call.get("id", ""),
            arguments=function.get("arguments"),
            status="cancelled",
            error="This tool call did not run.",
        )
    status = {"success": "success", "error": "error", "cancelled": "cancelled"}.get(execution.status, "calling")
    stored = execution.result if isinstance(execution.result, dict) else {}
    delegated = stored.get("delegation") if isinstance(stored.get("delegation"), dict) else None
    if delegated and (status == "calling" or delegated.get("state") == "working"):
        # It never reported back (Stop, or its worker died): its card says it was stopped.
        delegated = {**delegated, "state": "stopped", "message": f"{delegated.get('name', 'The agent')} was stopped."}
    return card(
        turn_id,
        step_index,
        position,
        name=name,
        call_id=execution.tool_call_id,
        arguments=execution.arguments if execution.arguments else function.get("arguments"),
        status=status,
        result=execution.result if status == "success" and not delegated else None,
        error=execution.error,
        error_type=execution.error_type,
        # A stopped delegation ends before it can report its duration; the live card had none.
        duration_ms=None if delegated and status == "cancelled" else execution.duration_ms,
        execution_id=execution.pk,
        delegation=delegated,
    )


# --- Turns for a page -------------------------------------------------------------------------


def turn_views(turns: Sequence[Turn]) -> tuple[dict[int, dict[str, Any]], dict[int, Message]]:
    """Turn views for many turns in a fixed number of queries (no per-turn lookups), and each
    turn's user message. Running turns show their live state; nothing here changes a turn."""
    from toolsets.models import ToolExecution

    ids = [t.pk for t in turns]
    messages: dict[int, list[Message]] = defaultdict(list)
    asked: dict[int, Message] = {}
    stale = []
    roles = (Message.Role.USER, Message.Role.ASSISTANT)
    for m in Message.objects.filter(turn_id__in=ids, role__in=roles).order_by("id"):
        if m.role == Message.Role.USER:
            if not m.lane:  # a subagent's task is shown in its card, not as the user's message
                asked.setdefault(m.turn_id, m)  # type: ignore[arg-type]
            continue
        messages[m.turn_id].append(m)  # type: ignore[index]
        if m.html_key != fingerprint():
            m.html, m.html_key = render_complete(m.content), fingerprint()
            stale.append(m)
    if stale:
        # A cache of the rendered text, stored once so the next view renders no Markdown at all.
        Message.objects.bulk_update(stale, ["html", "html_key"], batch_size=200)
    executions: dict[int, list[Any]] = defaultdict(list)
    for e in ToolExecution.objects.filter(turn_id__in=ids).defer("raw_arguments"):
        executions[e.turn_id].append(e)  # type: ignore[index]
    views = {}
    for t in turns:
        live = LiveTurn.load(t.pk) if t.is_active else None
        views[t.pk] = turn_from_live(live) if live else turn_from_db(t, messages[t.pk], executions[t.pk])
    return views, asked


def stored_turn_view(turn_id: int) -> dict[str, Any] | None:
    """One turn as the database has it (a finished turn, or one whose live state is gone)."""
    found = Turn.objects.filter(pk=turn_id).first()
    return turn_views([found])[0][found.pk] if found else None


# --- Fragments: the same partials, pushed over the socket ------------------------------------------


@cache
def _template(name: str) -> Template:
    return get_template(name).template  # type: ignore[no-any-return, attr-defined]


def render(name: str, context: dict[str, Any]) -> str:
    return _template(name).render(Context(context, autoescape=True))


def turn_fragment(view: dict[str, Any]) -> str:
    """The whole turn, replacing what the page has (a sync, or the end of an interrupted turn)."""
    return render("chat/_turn.html", {"turn": view, "oob": True})


def turn_state_fragment(live: LiveTurn) -> str:
    return render("chat/_turn_state.html", {"turn": turn_from_live(live), "oob": True})


def new_step_fragment(turn_id: int | str, index: int) -> str:
    html = render("chat/_step.html", {"step": step(turn_id, index, text="", cards=[], state="streaming")})
    return f'<div hx-swap-oob="beforeend:#{dom.steps(turn_id)}">{html}</div>'


def new_card_fragment(turn_id: int | str, index: int, card_view: dict[str, Any]) -> str:
    html = render("chat/_tool_card.html", {"card": card_view})
    return f'<div hx-swap-oob="beforeend:#{dom.cards(turn_id, index)}">{html}</div>'


def card_fragment(card_view: dict[str, Any], live: LiveTurn | None = None) -> str:
    if live is not None and card_view.get("delegation"):
        card_view = _with_lane(card_view, live.id, _live_lane_steps(live), citations.by_number(live.sources, live.id))
    return render("chat/_tool_card.html", {"card": card_view, "oob": True})


def cards_fragment(prefix: int | str, index: int, cards: list[dict[str, Any]], live: LiveTurn | None = None) -> str:
    if live is not None and any(c.get("delegation") for c in cards):
        lanes = _live_lane_steps(live)
        cite = citations.by_number(live.sources, live.id)
        cards = [_with_lane(c, live.id, lanes, cite) for c in cards]
    return render("chat/_tool_cards.html", {"turn_id": prefix, "step_index": index, "cards": cards, "oob": True})


def sources_fragment(turn_id: int, sources: list[dict[str, Any]]) -> str:
    return render(
        "chat/_sources.html",
        {"turn_id": turn_id, "sources": citations.source_views(turn_id, sources), "oob": True},
    )


class StepText:
    """One step's streamed text as the page has been sent it, and the fragments that bring the
    page to the current text: finished Markdown blocks are appended once, rendered; the growing
    last block is appended to or replaced as raw text."""

    def __init__(self, turn_id: int | str, index: int) -> None:
        self.turn_id, self.index = turn_id, index
        self.blocks: list[str] = []  # rendered finished blocks, in order: stored with the message
        self._tail: tuple[str, str] = ("", "")  # (tail, tail_html) last sent

    @property
    def html(self) -> str:
        return "".join(self.blocks)

    def fragments(self, text: str, *, complete: bool, cite: Citations | None = None) -> tuple[str, bool]:
        """(the fragments, whether a block finished). Finished blocks link their citations;
        `blocks` keeps them as rendered (a page view links them the same way)."""
        rendered: RenderedText = render_text(text, complete=complete, already=len(self.blocks))
        html = []
        if rendered.blocks:
            linked = "".join(citations.link(block, cite) for block in rendered.blocks)
            html.append(f'<div hx-swap-oob="beforeend:#{dom.blocks(self.turn_id, self.index)}">{linked}</div>')
        patch = tail_patch(*self._tail, rendered, complete=complete)
        tail_id = dom.tail(self.turn_id, self.index)
        if patch is not None and patch.replace:
            html.append(f'<div id="{tail_id}" class="md-tail" hx-swap-oob="true">{patch.html}</div>')
        elif patch is not None:
            html.append(f'<div hx-swap-oob="beforeend:#{tail_id}">{patch.html}</div>')
        self._tail = (rendered.tail, rendered.tail_html)
        self.blocks.extend(rendered.blocks)
        return "".join(html), bool(rendered.blocks)
