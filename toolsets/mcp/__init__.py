"""MCP servers as toolsets: an admin registers a server (stdio, streamable HTTP or SSE), and its
tools become a toolset with everything a built-in one has (see README, "MCP servers")."""
