"""Fragments: the page's own partials, rendered for the socket as out-of-band swaps."""

from __future__ import annotations

from functools import cache
from typing import Any

from django.template import Context, Template
from django.template.loader import get_template

from .. import citations, dom
from ..citations import Citations
from ..live import LiveTurn
from ..open_block import OpenBlock
from ..rendering import RenderedText, render_text
from .turns import live_lane_steps, step, turn_from_live, with_lane

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


def new_step_fragment(turn_id: int | str, index: int, steered: list[str] | None = None) -> str:
    view = step(turn_id, index, text="", cards=[], state="streaming", steered=steered)
    html = render("chat/_step.html", {"step": view})
    return f'<div hx-swap-oob="beforeend:#{dom.steps(turn_id)}">{html}</div>'


def new_card_fragment(turn_id: int | str, index: int, card_view: dict[str, Any]) -> str:
    html = render("chat/_tool_card.html", {"card": card_view})
    return f'<div hx-swap-oob="beforeend:#{dom.cards(turn_id, index)}">{html}</div>'


def card_fragment(card_view: dict[str, Any], live: LiveTurn | None = None) -> str:
    if live is not None and card_view.get("delegation"):
        card_view = with_lane(card_view, live.id, live_lane_steps(live), citations.by_number(live.sources, live.id))
    return render("chat/_tool_card.html", {"card": card_view, "oob": True})


def cards_fragment(prefix: int | str, index: int, cards: list[dict[str, Any]], live: LiveTurn | None = None) -> str:
    if live is not None and any(c.get("delegation") for c in cards):
        lanes = live_lane_steps(live)
        cite = citations.by_number(live.sources, live.id)
        cards = [with_lane(c, live.id, lanes, cite) for c in cards]
    return render("chat/_tool_cards.html", {"turn_id": prefix, "step_index": index, "cards": cards, "oob": True})


def sources_fragment(turn_id: int, sources: list[dict[str, Any]]) -> str:
    return render(
        "chat/_sources.html",
        {"turn_id": turn_id, "sources": citations.source_views(turn_id, sources), "oob": True},
    )


class StepText:
    """One step's streamed text as the page has been sent it, and the fragments that bring the
    page to the current text: finished Markdown blocks are appended once, rendered; the growing
    last block shows rendered too, changed in place (chat/open_block.py)."""

    def __init__(self, turn_id: int | str, index: int) -> None:
        self.turn_id, self.index = turn_id, index
        self.blocks: list[str] = []  # rendered finished blocks, in order: stored with the message
        self._open = OpenBlock()  # what the page's tail element shows
        self._done = ""  # the text of the finished blocks: the next call splits only what follows

    @property
    def html(self) -> str:
        return "".join(self.blocks)

    def fragments(self, text: str, *, complete: bool, cite: Citations | None = None) -> tuple[str, bool]:
        """(the fragments, whether a block finished). Finished blocks link their citations;
        `blocks` keeps them as rendered (a page view links them the same way)."""
        if text.startswith(self._done):
            rendered: RenderedText = render_text(text, complete=complete, start=len(self._done))
        else:  # the text changed under the blocks sent (never seen; the safe way still works)
            rendered = render_text(text, complete=complete, already=len(self.blocks))
        self._done = text[: rendered.rest]
        html = []
        if rendered.blocks:
            linked = "".join(citations.link(block, cite) for block in rendered.blocks)
            html.append(f'<div hx-swap-oob="beforeend:#{dom.blocks(self.turn_id, self.index)}">{linked}</div>')
        patch = self._open.update(rendered, complete=complete)
        tail_id = dom.tail(self.turn_id, self.index)
        if patch is not None and patch.replace:
            html.append(f'<div id="{tail_id}" class="md-tail" hx-swap-oob="true">{patch.html}</div>')
        elif patch is not None:
            html.append(f'<div hx-swap-oob="beforeend:{patch.selector(tail_id)}">{patch.html}</div>')
        self.blocks.extend(rendered.blocks)
        return "".join(html), bool(rendered.blocks)
