"""Full-text search over a user's chats: titles and the text of their messages."""
