"""`{% dom "name" arg… %}`: a DOM id from chat.dom, so templates never spell one themselves."""

from __future__ import annotations

from django import template

from chat import dom as ids

register = template.Library()


@register.simple_tag
def dom(name: str, *args: int | str) -> str:
    return ids.IDS[name](*args)
