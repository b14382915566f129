"""A component block's text → HTML: the card, or the block's text with a notice.

The partials render model data with autoescape — nothing here is ever marked safe. The result
then goes through nh3 with an allow-list of exactly what the partials use (not the Markdown one,
which would strip the cards' classes): a second line of defence, and it serialises the HTML the
way a browser does, so a card's DOM reads back as the very string we sent.
"""

from __future__ import annotations

import logging
import re
from functools import cache
from typing import Any

import nh3
from django.template import Context, Template
from django.template.loader import get_template

from .parser import Parsed, parse
from .registry import all_components

RAW_DISPLAY_LIMIT = 20_000
log = logging.getLogger(__name__)

# Everything the partials under templates/components/ use, and nothing else.
_TAGS = {
    "div", "span", "p", "a", "i", "h3", "h4", "ul", "ol", "li", "dl", "dt", "dd", "pre", "code", "time", "meter",
    "article", "section", "table", "caption", "thead", "tbody", "tr", "th", "td", "svg", "path", "rect", "circle",
}  # fmt: skip
_SVG = {
    "width",
    "height",
    "viewBox",
    "fill",
    "stroke",
    "stroke-width",
    "stroke-linecap",
    "stroke-linejoin",
    "focusable",
}
_ATTRIBUTES = {
    "*": {"class", "role"},
    "a": {"href", "target"},
    "time": {"datetime"},
    "meter": {"min", "max", "value"},
    "th": {"scope"},
    "td": {"colspan"},
    "svg": _SVG,
    "path": {"d"},
    "rect": {"x", "y", "width", "height", "rx"},
    "circle": {"cx", "cy", "r"},
}


# The partials' own classes, and nothing the page's chrome uses: a value that reached a class
# attribute (a bug, or a future partial) can never make a card look like one of the page's controls.
_CLASS_TOKEN = re.compile(r"(?:gu-|gen-ui)[\w-]*|is-(?:done|unread|over|near)|sr-only")


def keep_attribute(tag: str, attribute: str, value: str) -> str | None:
    """nh3's attribute filter: drops every class token that is not the partials' own."""
    if attribute == "class":
        return " ".join(token for token in value.split() if _CLASS_TOKEN.fullmatch(token)) or None
    return value


@cache
def _template(name: str) -> Template:
    return get_template(name).template  # type: ignore[no-any-return, attr-defined]


def _render(name: str, context: dict[str, Any]) -> str:
    html = _template(name).render(Context(context, autoescape=True)).strip()
    return nh3.clean(
        html,
        tags=_TAGS,
        attributes=_ATTRIBUTES,
        attribute_filter=keep_attribute,
        generic_attribute_prefixes={"aria-", "data-"},
        url_schemes={"http", "https"},
        link_rel="noopener noreferrer",
        strip_comments=True,
    )


def render(source: str) -> str:
    """A component block's text → the card's HTML (or the block's text with a notice)."""
    parsed = parse(source)
    if not parsed.error:
        component = all_components()[parsed.type]
        try:
            return _render(component.template, {"component": component, **component.prepare(parsed.data)})
        except Exception:
            # A bug here must cost one card, not the whole message (the page renders every block).
            log.exception("component %s failed to render", parsed.type)
            parsed = Parsed(parsed.type, parsed.body, error="it failed to render")
    raw = parsed.body if len(parsed.body) <= RAW_DISPLAY_LIMIT else parsed.body[:RAW_DISPLAY_LIMIT] + "\n…"
    return _render("components/_invalid.html", {"type": parsed.type, "reason": parsed.error, "raw": raw})


def render_placeholder(type_name: str | None) -> str:
    """What the page shows while a block is still being written."""
    # Only a known type reaches the cache and the partial: the opener's text is model data.
    return _placeholder(type_name if type_name in all_components() else None)


@cache
def _placeholder(type_name: str | None) -> str:
    component = all_components().get(type_name or "")
    label = component.placeholder if component else "Building a card…"
    return _render("components/_placeholder.html", {"type": type_name or "", "label": label})
