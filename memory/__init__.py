"""Memory: facts about a user the assistant keeps across chats, at the user's request.

Every read and write is scoped by the user it belongs to (memory.store); the Memory toolset
(memory.tools) saves and forgets through it, a turn's system prompt offers the relevant ones
(memory.prompt), and the account page shows, edits, deletes and exports them (memory.views)."""
