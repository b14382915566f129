"""Artifacts: documents the agent makes and revises in a chat (HTML, SVG, Markdown, Mermaid, code,
CSV), kept as versions by the agent and by the user, shown beside the chat in the sandbox MCP
Apps' Views use (never on Tessera's origin). The Artifacts toolset (`artifacts.tools`) is how the
model makes and edits them; the panel and downloads are `artifacts.views`."""
