"""The database side of search, per vendor.

SQLite: two FTS5 tables (message text, chat titles) kept in step with `chat_message` and
`chat_chat` by triggers, so every write — a streamed checkpoint, an edit, a bulk delete, a
cascade — updates them in the same transaction. PostgreSQL: GIN indexes on the very
expressions the queries use, so there is nothing to keep in step. Other databases fall back to a
plain substring filter.

Only the chat's own conversation is indexed: user and assistant messages of the main lane (a
subagent's transcript is its card's, tool results are data).
"""

from __future__ import annotations

from django.db import connection
from django.db.backends.base.base import BaseDatabaseWrapper

from core.fulltext import execute_for_vendor, fetch_rows

from .query import INDEXED_CHARS, fts5_query, tsquery

INDEXED_WHERE = "role IN ('user', 'assistant') AND lane = ''"

# --- SQLite -----------------------------------------------------------------------------------

_TOKENIZE = "tokenize = 'unicode61 remove_diacritics 0'"
SQLITE_TABLES = [
    f"CREATE VIRTUAL TABLE IF NOT EXISTS chatsearch_message_fts USING fts5(body, {_TOKENIZE})",
    f"CREATE VIRTUAL TABLE IF NOT EXISTS chatsearch_chat_fts USING fts5(title, {_TOKENIZE})",
]
_NEW_INDEXED = INDEXED_WHERE.replace("role", "new.role").replace("lane", "new.lane")
SQLITE_TRIGGERS = {
    "chatsearch_message_ai": f"""
        CREATE TRIGGER IF NOT EXISTS chatsearch_message_ai AFTER INSERT ON chat_message
        WHEN {_NEW_INDEXED} BEGIN
          INSERT INTO chatsearch_message_fts(rowid, body) VALUES (new.id, substr(new.content, 1, {INDEXED_CHARS}));
        END""",
    "chatsearch_message_au": f"""
        CREATE TRIGGER IF NOT EXISTS chatsearch_message_au AFTER UPDATE OF content, role, lane ON chat_message BEGIN
          DELETE FROM chatsearch_message_fts WHERE rowid = old.id;
          INSERT INTO chatsearch_message_fts(rowid, body)
            SELECT new.id, substr(new.content, 1, {INDEXED_CHARS}) WHERE {_NEW_INDEXED};
        END""",
    "chatsearch_message_ad": """
        CREATE TRIGGER IF NOT EXISTS chatsearch_message_ad AFTER DELETE ON chat_message BEGIN
          DELETE FROM chatsearch_message_fts WHERE rowid = old.id;
        END""",
    "chatsearch_chat_ai": """
        CREATE TRIGGER IF NOT EXISTS chatsearch_chat_ai AFTER INSERT ON chat_chat BEGIN
          INSERT INTO chatsearch_chat_fts(rowid, title) VALUES (new.id, new.title);
        END""",
    "chatsearch_chat_au": """
        CREATE TRIGGER IF NOT EXISTS chatsearch_chat_au AFTER UPDATE OF title ON chat_chat BEGIN
          DELETE FROM chatsearch_chat_fts WHERE rowid = old.id;
          INSERT INTO chatsearch_chat_fts(rowid, title) VALUES (new.id, new.title);
        END""",
    "chatsearch_chat_ad": """
        CREATE TRIGGER IF NOT EXISTS chatsearch_chat_ad AFTER DELETE ON chat_chat BEGIN
          DELETE FROM chatsearch_chat_fts WHERE rowid = old.id;
        END""",
}
SQLITE_REBUILD = [
    "DELETE FROM chatsearch_message_fts",
    "DELETE FROM chatsearch_chat_fts",
    f"""INSERT INTO chatsearch_message_fts(rowid, body)
        SELECT id, substr(content, 1, {INDEXED_CHARS}) FROM chat_message WHERE {INDEXED_WHERE}""",
    "INSERT INTO chatsearch_chat_fts(rowid, title) SELECT id, title FROM chat_chat",
]
SQLITE_DROP = [
    *(f"DROP TRIGGER IF EXISTS {name}" for name in SQLITE_TRIGGERS),
    "DROP TABLE IF EXISTS chatsearch_message_fts",
    "DROP TABLE IF EXISTS chatsearch_chat_fts",
]

# --- PostgreSQL -------------------------------------------------------------------------------
# Tokens are runs of letters and digits on both databases: PostgreSQL's parser would otherwise
# keep "name@example.com" or "v1.2" whole, and a search for "example" would find it on SQLite only.


def _pg_vector(column: str) -> str:
    return f"to_tsvector('simple'::regconfig, regexp_replace({column}, '[^[:alnum:]]+', ' ', 'g'))"


_PG_QUERY = "to_tsquery('simple'::regconfig, %s)"
PG_MESSAGE_VECTOR = _pg_vector(f"left(content, {INDEXED_CHARS})")
PG_TITLE_VECTOR = _pg_vector("title")
PG_INDEXES = [
    f"CREATE INDEX IF NOT EXISTS chatsearch_message_tsv ON chat_message USING gin (({PG_MESSAGE_VECTOR})) "
    f"WHERE {INDEXED_WHERE}",
    f"CREATE INDEX IF NOT EXISTS chatsearch_chat_tsv ON chat_chat USING gin (({PG_TITLE_VECTOR}))",
]
PG_DROP = ["DROP INDEX IF EXISTS chatsearch_message_tsv", "DROP INDEX IF EXISTS chatsearch_chat_tsv"]


def install(conn: BaseDatabaseWrapper) -> None:
    """Creates the index for this database (the migration, and the repair after migrations)."""
    execute_for_vendor(
        conn, {"sqlite": [*SQLITE_TABLES, *SQLITE_TRIGGERS.values(), *SQLITE_REBUILD], "postgresql": PG_INDEXES}
    )


def uninstall(conn: BaseDatabaseWrapper) -> None:
    execute_for_vendor(conn, {"sqlite": SQLITE_DROP, "postgresql": PG_DROP})


def repair(conn: BaseDatabaseWrapper) -> bool:
    """On SQLite, a migration that rebuilds `chat_message` or `chat_chat` (how SQLite alters a
    table) drops their triggers with the old table. Run after every migrate: puts missing
    triggers back and rebuilds the index from the tables. True if anything was repaired."""
    if conn.vendor != "sqlite":
        return False
    with conn.cursor() as cursor:
        cursor.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'trigger') AND name LIKE 'chatsearch_%'")
        present = {row[0] for row in cursor.fetchall()}
        if "chatsearch_message_fts" not in present:
            return False  # the search migration has not run (yet): nothing to repair
        if set(SQLITE_TRIGGERS) <= present:
            return False
    install(conn)
    return True


# --- Queries ----------------------------------------------------------------------------------


# Only the branch a chat shows is found: a version edited away or answered again stays in the
# index (switching back shows it again) but a hit on it would open a chat that does not show it.
SHOWN_BRANCH_JOIN = "LEFT JOIN chat_turn t ON t.id = m.turn_id AND t.active = %s"
SHOWN_BRANCH = "(m.turn_id IS NULL OR t.id IS NOT NULL)"


def matching(user_id: int, words: list[str]) -> tuple[set[int], dict[int, int]]:
    """The user's chats whose title matches every word, and for each of the user's chats with a
    message that does, its latest such message: (chat ids, {chat id: message id})."""
    if not words:
        return set(), {}
    if connection.vendor == "sqlite":
        match = fts5_query(words)
        titles = fetch_rows(
            "SELECT id FROM chat_chat WHERE owner_id = %s AND id IN "
            "(SELECT rowid FROM chatsearch_chat_fts WHERE chatsearch_chat_fts MATCH %s)",
            [user_id, match],
        )
        messages = fetch_rows(
            "SELECT m.chat_id, MAX(m.id) FROM chat_message m JOIN chat_chat c ON c.id = m.chat_id "
            f"{SHOWN_BRANCH_JOIN} WHERE c.owner_id = %s AND {SHOWN_BRANCH} AND m.id IN "
            "(SELECT rowid FROM chatsearch_message_fts WHERE chatsearch_message_fts MATCH %s) "
            "GROUP BY m.chat_id",
            [True, user_id, match],
        )
    elif connection.vendor == "postgresql":
        query = tsquery(words)
        titles = fetch_rows(
            f"SELECT id FROM chat_chat WHERE owner_id = %s AND {PG_TITLE_VECTOR} @@ {_PG_QUERY}",
            [user_id, query],
        )
        where = INDEXED_WHERE.replace("role", "m.role").replace("lane", "m.lane")
        messages = fetch_rows(
            "SELECT m.chat_id, MAX(m.id) FROM chat_message m JOIN chat_chat c ON c.id = m.chat_id "
            f"{SHOWN_BRANCH_JOIN} WHERE c.owner_id = %s AND {SHOWN_BRANCH} AND {where} "
            f"AND {_pg_vector(f'left(m.content, {INDEXED_CHARS})')} @@ {_PG_QUERY} "
            "GROUP BY m.chat_id",
            [True, user_id, query],
        )
    else:
        return _fallback(user_id, words)
    return {row[0] for row in titles}, {row[0]: row[1] for row in messages}


def _fallback(user_id: int, words: list[str]) -> tuple[set[int], dict[int, int]]:
    from django.db.models import Max, Q

    from chat.models import Chat, Message

    title_q, text_q = Q(), Q()
    for word in words:
        title_q &= Q(title__icontains=word)
        text_q &= Q(content__icontains=word)
    titles = set(Chat.objects.filter(title_q, owner_id=user_id).values_list("id", flat=True))
    rows = (
        Message.objects.filter(text_q, chat__owner_id=user_id, role__in=["user", "assistant"], lane="")
        .filter(Q(turn__isnull=True) | Q(turn__active=True))
        .values("chat_id")
        .annotate(last=Max("id"))
    )
    return titles, {row["chat_id"]: row["last"] for row in rows}
