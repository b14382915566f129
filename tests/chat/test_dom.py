"""DOM ids spelled once (chat/dom.py, chat/templatetags/dom.py): the `{% dom %}` tag renders what
the Python functions return, every fragment the worker pushes targets an element the page has,
and the prefixes handed to chat.js build the same ids."""

from __future__ import annotations

import inspect
from html.parser import HTMLParser
from typing import Any

import pytest
from django.template import Context, Template
from django.test import Client

from chat import dom, presenters
from chat.live import LiveTurn

TURN_ID = 31


class Ids(HTMLParser):
    """Element ids, and the ids out-of-band swaps target: `hx-swap-oob="beforeend:#x"` appends to
    element x, `hx-swap-oob="true"` replaces the element of the same id."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.ids: list[str] = []
        self.targets: list[str] = []
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if values.get("id"):
            self.ids.append(str(values["id"]))
        swap = values.get("hx-swap-oob") or ""
        if "#" in swap:
            # `#x>:last-child` appends inside x's last child: x is what must exist.
            self.targets.append(swap.split("#", 1)[1].split(">", 1)[0])
        elif swap == "true" and values.get("id"):
            self.targets.append(str(values["id"]))  # replaced whole


def tag(name: str, *args: Any) -> str:
    source = "{% load dom %}{% dom " + " ".join([f'"{name}"', *(repr(a) for a in args)]) + " %}"
    return Template(source).render(Context())


@pytest.mark.parametrize("name", sorted(dom.IDS))
def test_the_template_tag_renders_what_python_spells(name: str) -> None:
    function = dom.IDS[name]
    args = [TURN_ID, 2, 5][: len(inspect.signature(function).parameters)]

    assert tag(name, *args) == function(*args)


def test_ids_of_different_places_never_collide() -> None:
    places = [(t, s, p) for t in (1, 12) for s in (1, 2, 21) for p in (1, 3)]
    cards = {dom.card(*place) for place in places}
    steps = {dom.step(t, s) for t, s, _ in places}

    assert len(cards) == len(places) and len(steps) == len({(t, s) for t, s, _ in places})


def rendered_turn() -> str:
    card = presenters.card(
        TURN_ID, 0, 0, name="toolset__clock_math__calculate", arguments={"expression": "6*7"}, status="calling"
    )
    steps = [
        presenters.step(TURN_ID, 0, text="Let me calculate.", cards=[card], state="complete"),
        presenters.step(TURN_ID, 1, text="It is", cards=[], state="streaming"),
    ]
    return presenters.turn_fragment(presenters.turn(TURN_ID, status="running", steps=steps))


def test_a_rendered_turn_carries_the_ids_python_spells() -> None:
    ids = Ids(rendered_turn()).ids

    expected = [
        dom.turn(TURN_ID),
        dom.steps(TURN_ID),
        dom.turn_state(TURN_ID),
        *(dom.step(TURN_ID, i) for i in (0, 1)),
        *(dom.cards(TURN_ID, i) for i in (0, 1)),
        *(dom.blocks(TURN_ID, i) for i in (0, 1)),
        *(dom.tail(TURN_ID, i) for i in (0, 1)),
        dom.card(TURN_ID, 0, 0),
    ]
    assert sorted(set(expected) - set(ids)) == []
    assert len(ids) == len(set(ids)), "an id appears twice on the page"


def test_every_pushed_fragment_targets_an_element_of_the_page() -> None:
    page = set(Ids(rendered_turn()).ids)
    card = presenters.card(TURN_ID, 1, 0, name="toolset__clock_math__current_time")
    text = presenters.StepText(TURN_ID, 1)
    first, _ = text.fragments("It is **42**.\n\nAnd more", complete=False)
    replaced, _ = text.fragments("It is **42**.\n\nAnd more text, `code", complete=False)
    pushed = [
        presenters.new_step_fragment(TURN_ID, 2),
        presenters.new_card_fragment(TURN_ID, 1, card),
        presenters.card_fragment(presenters.card(TURN_ID, 0, 0, name="toolset__clock_math__calculate")),
        presenters.cards_fragment(TURN_ID, 0, []),
        first,
        replaced,
    ]

    targets = {target for html in pushed for target in Ids(html).targets}
    assert {
        dom.steps(TURN_ID),
        dom.cards(TURN_ID, 0),
        dom.cards(TURN_ID, 1),
        dom.card(TURN_ID, 0, 0),
        dom.blocks(TURN_ID, 1),
        dom.tail(TURN_ID, 1),
    } <= targets
    assert sorted(targets - page) == []


def test_the_turn_state_fragment_replaces_the_state_and_continue_box() -> None:
    state = LiveTurn(TURN_ID, 8, status="completed", finish_reason="length")

    ids = Ids(presenters.turn_state_fragment(state)).ids

    assert ids[:2] == [dom.turn_state(TURN_ID), dom.continue_box(TURN_ID)]


@pytest.mark.django_db
def test_the_page_hands_chat_js_the_prefixes_of_python_ids(client: Client, user: Any, demo_model: Any) -> None:
    client.force_login(user)

    html = client.get("/").content.decode()

    turn_prefix, state_prefix = dom.turn(""), dom.turn_state("")
    assert f'data-dom-turn="{turn_prefix}"' in html
    assert f'data-dom-turn-state="{state_prefix}"' in html
    # chat.js appends a turn's id to the prefix: it must spell the same id Python does.
    assert turn_prefix + str(TURN_ID) == dom.turn(TURN_ID)
    assert state_prefix + str(TURN_ID) == dom.turn_state(TURN_ID)
