"""The DOM ids the chat page, the socket's fragments and chat.js share, spelled once.

Templates use them through `{% dom "tail" turn_id step %}` (chat/templatetags/dom.py), Python
through these functions, and chat.js through the prefixes the page puts on `<body>`
(`data-dom-turn`, `data-dom-turn-state`).
"""

from __future__ import annotations

from collections.abc import Callable


def lane(turn_id: int | str, path: str = "") -> str:
    """The prefix a lane's steps use in place of the turn id: the turn's own steps use the turn
    id; a subagent's (lane "0-1", "0-1/2-0") add its path, so ids never collide."""
    return f"{turn_id}-{path.replace('/', '-')}" if path else str(turn_id)


def sources(turn_id: int | str) -> str:
    return f"sources-{turn_id}"


def source(turn_id: int | str, number: int | str) -> str:
    return f"src-{turn_id}-{number}"


def turn(turn_id: int | str) -> str:
    return f"turn-{turn_id}"


def turn_title(turn_id: int | str) -> str:
    return f"turn-title-{turn_id}"


def turn_state(turn_id: int | str) -> str:
    return f"turn-state-{turn_id}"


def steps(turn_id: int | str) -> str:
    return f"steps-{turn_id}"


def step(turn_id: int | str, index: int | str) -> str:
    return f"step-{turn_id}-{index}"


def cards(turn_id: int | str, index: int | str) -> str:
    return f"cards-{turn_id}-{index}"


def blocks(turn_id: int | str, index: int | str) -> str:
    return f"blocks-{turn_id}-{index}"


def tail(turn_id: int | str, index: int | str) -> str:
    return f"tail-{turn_id}-{index}"


def card(turn_id: int | str, index: int | str, position: int | str) -> str:
    return f"card-{turn_id}-{index}-{position}"


def continue_box(turn_id: int | str) -> str:
    return f"continue-{turn_id}"


def versions(turn_id: int | str) -> str:
    return f"versions-{turn_id}"


def actions(turn_id: int | str) -> str:
    return f"actions-{turn_id}"


IDS: dict[str, Callable[..., str]] = {
    "turn": turn,
    "turn_title": turn_title,
    "turn_state": turn_state,
    "steps": steps,
    "step": step,
    "cards": cards,
    "blocks": blocks,
    "tail": tail,
    "card": card,
    "continue": continue_box,
    "sources": sources,
    "source": source,
    "versions": versions,
    "actions": actions,
}
