"""The LiteLLM custom providers every process may call, declared here (the wiring) and registered
at their first use by the seam (agent/providers.py): a web process that embeds a knowledge
search's query with `demo/embed` registers the demo model then, not at start-up."""

from __future__ import annotations

from agent import providers

# The offline demo model (demo/): `demo/tessera` for chat, `demo/embed` for knowledge passages.
providers.declare("demo", "demo:register")
