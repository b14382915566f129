from __future__ import annotations

from django import template

from ..models import MCPServer

register = template.Library()


@register.simple_tag
def mcp_server(toolset_id: str) -> MCPServer | None:
    if not toolset_id.startswith("mcp_"):
        return None
    return MCPServer.objects.filter(slug=toolset_id.removeprefix("mcp_")).first()
