"""Everything the chat shows of a turn, for the page and for the socket alike.

View models (the plain dicts the partials render) are built from the database for a finished
turn and from its `LiveTurn` for a running one; fragments (what the worker pushes) render the
very same partials. The page, a reconnect and the live stream therefore show the same thing.
"""

from .cards import (
    RESULT_DISPLAY_LIMIT,
    STATUS_LABELS,
    card,
    card_from_execution,
    delegation,
    pretty_json,
    tool_display_name,
)
from .fragments import (
    StepText,
    card_fragment,
    cards_fragment,
    new_card_fragment,
    new_step_fragment,
    render,
    sources_fragment,
    turn_fragment,
    turn_state_fragment,
)
from .question import approval, elicitation, question
from .turns import exchange, step, stored_turn_view, turn, turn_from_db, turn_from_live, turn_views

__all__ = [
    "RESULT_DISPLAY_LIMIT",
    "STATUS_LABELS",
    "StepText",
    "approval",
    "card",
    "card_fragment",
    "card_from_execution",
    "cards_fragment",
    "delegation",
    "elicitation",
    "exchange",
    "new_card_fragment",
    "new_step_fragment",
    "pretty_json",
    "question",
    "render",
    "sources_fragment",
    "step",
    "stored_turn_view",
    "tool_display_name",
    "turn",
    "turn_fragment",
    "turn_from_db",
    "turn_from_live",
    "turn_state_fragment",
    "turn_views",
]
