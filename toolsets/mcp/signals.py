"""What an MCP connection hears that apps above toolsets act on, as Django signals: toolsets
cannot import them, they connect here (knowledge re-reads its documents of a changed resource)."""

from __future__ import annotations

from django.dispatch import Signal

# A server said one of its resources changed (`notifications/resources/updated`: `uri`) or that
# its list of resources changed (`notifications/resources/list_changed`: `uri` is None). Sent
# with `server_id`, the MCPServer's primary key, from a thread of its own (it may query).
resources_changed = Signal()
