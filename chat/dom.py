"""The DOM ids the chat page, the socket's fragments and chat.js share, spelled once.

Templates use them through `{% dom "tail" turn_id step %}` (chat/templatetags/dom.py), Python
through these functions, and chat.js through the prefixes the page puts on `<body>`
(`data-dom-turn`, `data-dom-turn-state`).
"""

from __future__ import annotations

from collections.abc import Callable


def turn(turn_id: int | str) -> str:
    return f"turn-{turn_id}"


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


IDS: dict[str, Callable[..., str]] = {
    "turn": turn,
    "turn_state": turn_state,
    "steps": steps,
    "step": step,
    "cards": cards,
    "blocks": blocks,
    "tail": tail,
    "card": card,
    "continue": continue_box,
}
