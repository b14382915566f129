"""The Code card's pieces: the code, highlighted like an answer's code blocks (Pygments' token
classes under the `hl-` prefix, static/css/highlight.css)."""

from __future__ import annotations

import json
from typing import Any

from django import template
from django.utils.safestring import SafeString, mark_safe
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import PythonLexer

register = template.Library()
CODE_LIMIT = 100_000
_FORMATTER = HtmlFormatter(nowrap=True, classprefix="hl-")


@register.filter
def code_argument(arguments: Any) -> str:
    """The `code` of a call's arguments: an object, or the JSON text the model sent."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return ""
    code = arguments.get("code") if isinstance(arguments, dict) else None
    return code[:CODE_LIMIT] if isinstance(code, str) else ""


@register.filter
def python_html(code: str) -> SafeString:
    # Pygments escapes every character of the source: what comes out is its spans and the text.
    html: str = highlight(code, PythonLexer(), _FORMATTER)
    return mark_safe(html)
