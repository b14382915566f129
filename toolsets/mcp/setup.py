"""The example server's registration, shared by `setup_demo` and the tests."""

from __future__ import annotations

import sys
from pathlib import Path

from .models import MCPServer

EXAMPLE_SLUG = "units"
EXAMPLE_SCRIPT = Path(__file__).with_name("example_server.py")


def register_example() -> str:
    if MCPServer.objects.filter(slug=EXAMPLE_SLUG).exists():
        return "Example MCP server (unit converter) already registered."
    server = MCPServer.objects.create(
        name="Unit converter",
        slug=EXAMPLE_SLUG,
        description="Converts lengths, masses, volumes and temperatures. The example MCP server Tessera ships.",
        transport=MCPServer.Transport.STDIO,
        command=sys.executable,
        args=[str(EXAMPLE_SCRIPT)],
        timeout_s=20,
        # Tessera's own code: its read-only claims are true, so its tools run without asking.
        trust_annotations=True,
    )
    from .discovery import refresh

    ok, text = refresh(server, None)
    return ("Registered the example MCP server. " if ok else "Registered the example MCP server, but: ") + text
