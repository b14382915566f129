"""The Python-rendered select gives the markup Django's template-rendered one gives."""

from __future__ import annotations

from html.parser import HTMLParser

import pytest
from django import forms

from core.widgets import PlainSelect

CHOICES = [("UTC", "UTC"), ("Europe/Berlin", "Europe/Berlin"), ('<b>"x"&', 'A <hostile> & "label"')]


def _parsed(html: str, field: str) -> list[tuple[str, object]]:
    """Tags (attributes in any order) and text, the other field's name made this one's."""
    found: list[tuple[str, object]] = []

    class Reader(HTMLParser):
        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            named = {k: (v or "").replace(field, "FIELD") for k, v in attrs}
            found.append((tag, sorted(named.items())))

        def handle_data(self, data: str) -> None:
            if data.strip():
                found.append(("text", data.strip()))

    Reader().feed(html)
    return found


class _Form(forms.Form):
    plain = forms.ChoiceField(choices=CHOICES, widget=PlainSelect, help_text="Where the clock is")
    django = forms.ChoiceField(choices=CHOICES, help_text="Where the clock is")


@pytest.mark.parametrize("value", [None, "Europe/Berlin", '<b>"x"&', "not offered"])
def test_same_markup_as_djangos_select(value: str | None) -> None:
    form = _Form(data={"plain": value, "django": value} if value is not None else None)
    plain, django = str(form["plain"]), str(form["django"])
    assert _parsed(plain, "plain") == _parsed(django, "django")
    assert "<hostile>" not in plain and "&lt;hostile&gt;" in plain
