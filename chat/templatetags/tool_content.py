"""`{{ card.content|tool_content }}`: a tool's content blocks as HTML (chat.tool_content).

Rendered when the card is, never kept rendered: a card travels as JSON (the live turn's stored
state, read back when a page syncs mid-turn), and HTML kept in it would come back as a plain
string and be escaped — the image a tool returned showed as text until a reload."""

from __future__ import annotations

from typing import Any

from django import template
from django.utils.safestring import SafeString

from chat import tool_content as content

register = template.Library()


@register.filter(name="tool_content")
def tool_content(result: Any) -> SafeString | str:
    return content.render(result) or ""
