"""Form widgets rendered in Python where Django's per-option templates are too slow.

Django renders each `<option>` of a select through a template (several includes each): about
60 µs an option. The automation form's time-zone list has some 600, so every render of that
form (each failed save, each preview) spent ~150 ms on one field.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.forms.utils import flatatt
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

_SELECTED = mark_safe(" selected")


class PlainSelect(forms.Select):
    """A single choice of flat (value, label) pairs, the same markup as `forms.Select`."""

    def render(self, name: str, value: Any, attrs: dict[str, Any] | None = None, renderer: Any = None) -> SafeString:
        final = self.build_attrs(self.attrs, attrs)
        chosen = {str(v) for v in self.format_value(value)}
        options = format_html_join(
            "",
            '<option value="{}"{}>{}</option>',
            ((key, _SELECTED if str(key) in chosen else "", label) for key, label in self.choices),
        )
        return format_html('<select name="{}"{}>{}</select>', name, flatatt(final), options)
