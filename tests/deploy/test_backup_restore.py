"""The backup and restore procedure of docs/operations/backup.md, run as written: a Tessera
instance with stored secrets and a file is backed up with the documented commands, restored into
a fresh database and data directory, and `manage.py check_secrets` passes with the right key and
fails clearly with a wrong or missing one. Once on SQLite, once on PostgreSQL (the local server,
when there is one: each run creates its own uniquely named databases and drops them)."""

from __future__ import annotations

import os
import shlex
import shutil
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import database

pytestmark = [pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "operations" / "backup.md"

# The documented commands, word for word (test_the_documented_commands_are_these checks it).
BACKUP_POSTGRES = 'pg_dump --format=custom --no-owner --file="$BACKUP/tessera.dump" "$DATABASE_URL"'
BACKUP_SQLITE = 'sqlite3 "$TESSERA_VAR_DIR/tessera.sqlite3" ".backup \'$BACKUP/tessera.sqlite3\'"'
BACKUP_SQLITE_PYTHON = (
    "python -c 'import sqlite3, sys; sqlite3.connect(sys.argv[1]).backup(sqlite3.connect(sys.argv[2]))' "
    '"$TESSERA_VAR_DIR/tessera.sqlite3" "$BACKUP/tessera.sqlite3"'
)
BACKUP_FILES = 'tar -C "${TESSERA_FILES_DIR:-$TESSERA_VAR_DIR/files}" -czf "$BACKUP/files.tar.gz" .'
RESTORE_POSTGRES = 'pg_restore --no-owner --exit-on-error --dbname="$DATABASE_URL" "$BACKUP/tessera.dump"'
RESTORE_SQLITE = (
    'rm -f "$TESSERA_VAR_DIR/tessera.sqlite3-wal" "$TESSERA_VAR_DIR/tessera.sqlite3-shm" && '
    'cp "$BACKUP/tessera.sqlite3" "$TESSERA_VAR_DIR/tessera.sqlite3"'
)
RESTORE_FILES = (
    'mkdir -p "${TESSERA_FILES_DIR:-$TESSERA_VAR_DIR/files}" && '
    'tar -C "${TESSERA_FILES_DIR:-$TESSERA_VAR_DIR/files}" -xzf "$BACKUP/files.tar.gz"'
)

KEY = "the-field-encryption-key-of-the-old-host"
API_KEY = "sk-live-restore-me-0001"
HEADER = "mcp-header-restore-me-0002"
FILE_BYTES = b"Minutes of the launch meeting.\n"

POPULATE = f"""
from django.contrib.auth import get_user_model
from django.core.files.base import ContentFile
from chat.models import Chat, LLMModel, Message
from toolsets.files.models import Attachment
from toolsets.mcp.models import MCPServer

user = get_user_model().objects.create_user("ops", password="a long test passphrase")
LLMModel.objects.create(name="GPT", model="openai/gpt-4o", api_key={API_KEY!r})
MCPServer.objects.create(name="Docs", slug="docs", url="https://mcp.example.com/mcp",
                         headers='{{"X-Api-Key": "{HEADER}"}}')
attachment = Attachment(owner=user, name="notes.txt", size={len(FILE_BYTES)}, kind="text",
                        content_type="text/plain", status="ready", text={FILE_BYTES.decode()!r})
attachment.file.save("notes.txt", ContentFile({FILE_BYTES!r}), save=False)
attachment.save()
chat = Chat.objects.create(owner=user, title="Launch")
Message.objects.create(chat=chat, role="user", content="Where is the Fushimi Inari shrine?")
"""

VERIFY = f"""
from chat.models import Chat, LLMModel
from chat.search.backends import matching
from toolsets.files.models import Attachment
from toolsets.mcp.models import MCPServer

assert LLMModel.objects.get(model="openai/gpt-4o").api_key == {API_KEY!r}
assert {HEADER!r} in MCPServer.objects.get().headers
with Attachment.objects.get().file.open("rb") as stored:
    assert stored.read() == {FILE_BYTES!r}
# The full-text index came along (SQLite's FTS5 tables, PostgreSQL's GIN indexes).
launch = Chat.objects.get(title="Launch")
titles, messages = matching(launch.owner_id, ["launch"])
assert titles == {{launch.pk}}
titles, messages = matching(launch.owner_id, ["fush"])
assert list(messages) == [launch.pk]
print("restored instance reads its keys and files")
"""


class Instance:
    """One Tessera installation: a data directory and a database, run through manage.py."""

    def __init__(self, var_dir: Path, database_url: str, redis_url: str, **env: str) -> None:
        self.var_dir = var_dir
        self.env = {
            **{k: v for k, v in os.environ.items() if k not in ("FIELD_ENCRYPTION_KEY", "SECRET_KEY")},
            "TESSERA_VAR_DIR": str(var_dir),
            "DATABASE_URL": database_url,
            "REDIS_URL": redis_url,
            "PROMETHEUS_MULTIPROC_DIR": str(var_dir / "metrics"),
            **env,
        }
        self.env.pop("TESSERA_FILES_DIR", None)

    def manage(self, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env={**self.env, **env},
            capture_output=True,
            text=True,
            timeout=300,  # a hang guard: a migrate on a loaded two-core machine takes minutes
        )

    def shell(self, command: str, **env: str) -> None:
        """A documented command, as an operator's shell runs it."""
        command = command.replace("python -c", f"{shlex.quote(sys.executable)} -c")
        done = subprocess.run(["bash", "-euc", command], env={**self.env, **env}, capture_output=True, text=True)
        assert done.returncode == 0, f"{command}\n{done.stdout}\n{done.stderr}"


def ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def check_restored(restored: Instance) -> None:
    """What the procedure's last steps promise, and what a wrong or lost key looks like."""
    ok(restored.manage("migrate", "--noinput"))
    report = ok(restored.manage("check_secrets"))
    assert "Key: FIELD_ENCRYPTION_KEY" in report
    assert "All 2 stored secrets decrypt with this key." in report
    assert "restored instance reads its keys and files" in ok(restored.manage("shell", "-c", VERIFY))

    wrong = restored.manage("check_secrets", FIELD_ENCRYPTION_KEY="a key that was never used")
    assert wrong.returncode == 1, wrong.stdout + wrong.stderr
    assert "chat.LLMModel.api_key" in wrong.stdout
    assert "1 cannot be decrypted with this key" in wrong.stdout
    assert "2 of 2 stored secrets cannot be read with this key." in wrong.stdout
    # A restore that forgot the key altogether runs on a newly generated one.
    lost = restored.manage("check_secrets", FIELD_ENCRYPTION_KEY="", TESSERA_VAR_DIR=str(restored.var_dir / "fresh"))
    assert lost.returncode == 1
    assert "the generated key in" in lost.stdout
    for output in (report, wrong.stdout + wrong.stderr, lost.stdout + lost.stderr):
        assert API_KEY not in output and HEADER not in output and KEY not in output


def test_the_documented_commands_are_these() -> None:
    text = DOC.read_text()
    for command in (
        BACKUP_POSTGRES,
        BACKUP_SQLITE,
        BACKUP_SQLITE_PYTHON,
        BACKUP_FILES,
        RESTORE_POSTGRES,
        RESTORE_SQLITE,
        RESTORE_FILES,
    ):
        assert command in text, f"docs/operations/backup.md no longer says: {command}"


# A dozen manage.py processes, each migrating or loading the whole project: minutes on a busy
# machine (the suite's workers run beside it), not a hang.
@pytest.mark.timeout(600)
def test_sqlite_backup_restores_into_a_fresh_instance(tmp_path: Path, redis_server: str, django_db_setup: None) -> None:
    old_var, new_var = tmp_path / "old", tmp_path / "new"
    old = Instance(old_var, f"sqlite:///{old_var / 'tessera.sqlite3'}", redis_server, FIELD_ENCRYPTION_KEY=KEY)
    # The old installation as `manage.py migrate` leaves it: the suite's migrated template.
    if not database.copy_migrated(old_var / "tessera.sqlite3"):
        ok(old.manage("migrate", "--noinput"))
    ok(old.manage("shell", "-c", POPULATE))

    # Both documented ways of copying the database give the same data; the sqlite3 program's
    # copy is restored when the program is there.
    backups = {"python": tmp_path / "backup-python", "sqlite3": tmp_path / "backup-sqlite3"}
    for folder in backups.values():
        folder.mkdir()
    old.shell(BACKUP_SQLITE_PYTHON, BACKUP=str(backups["python"]))
    if shutil.which("sqlite3"):
        old.shell(BACKUP_SQLITE, BACKUP=str(backups["sqlite3"]))
        assert _dump(backups["sqlite3"] / "tessera.sqlite3") == _dump(backups["python"] / "tessera.sqlite3")
        backup = backups["sqlite3"]
    else:
        backup = backups["python"]
    old.shell(BACKUP_FILES, BACKUP=str(backup))

    new_var.mkdir()
    restored = Instance(new_var, f"sqlite:///{new_var / 'tessera.sqlite3'}", redis_server, FIELD_ENCRYPTION_KEY=KEY)
    # Before the database is restored there is nothing to check: said so, with its own exit status.
    empty = restored.manage("check_secrets")
    assert empty.returncode == 2
    assert "has `manage.py migrate` been run?" in empty.stderr
    (new_var / "tessera.sqlite3").unlink(missing_ok=True)
    restored.shell(RESTORE_SQLITE, BACKUP=str(backup))
    restored.shell(RESTORE_FILES, BACKUP=str(backup))
    check_restored(restored)


def _dump(path: Path) -> list[str]:
    connection = sqlite3.connect(path)
    try:
        assert connection.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        return list(connection.iterdump())
    finally:
        connection.close()


def _postgres() -> str | None:
    """The local PostgreSQL's admin URL, when there is a server and the client programs."""
    if not all(shutil.which(p) for p in ("pg_dump", "pg_restore", "psql")):
        return None
    url = "postgres://postgres@127.0.0.1:5432/postgres"
    probe = subprocess.run(["psql", url, "-Atc", "select 1"], capture_output=True, text=True, timeout=10)
    return url if probe.returncode == 0 else None


@pytest.fixture
def postgres_databases() -> Iterator[tuple[str, str]]:
    admin = _postgres()
    if admin is None:
        pytest.skip("no PostgreSQL on 127.0.0.1:5432 (or no pg_dump/pg_restore)")
    names = [f"tessera_backup_{uuid.uuid4().hex[:12]}", f"tessera_restored_{uuid.uuid4().hex[:12]}"]
    for name in names:
        subprocess.run(["psql", admin, "-qc", f'CREATE DATABASE "{name}"'], check=True, timeout=30)
    try:
        yield tuple(f"postgres://postgres@127.0.0.1:5432/{name}" for name in names)  # type: ignore[misc]
    finally:
        for name in names:
            subprocess.run(["psql", admin, "-qc", f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'], timeout=30)


@pytest.mark.timeout(600)
def test_postgresql_backup_restores_into_a_fresh_database(
    tmp_path: Path, redis_server: str, postgres_databases: tuple[str, str]
) -> None:
    source_url, restored_url = postgres_databases
    backup = tmp_path / "backup"
    backup.mkdir()
    old = Instance(tmp_path / "old", source_url, redis_server, FIELD_ENCRYPTION_KEY=KEY)
    ok(old.manage("migrate", "--noinput"))
    ok(old.manage("shell", "-c", POPULATE))

    old.shell(BACKUP_POSTGRES, BACKUP=str(backup))
    old.shell(BACKUP_FILES, BACKUP=str(backup))

    restored = Instance(tmp_path / "new", restored_url, redis_server, FIELD_ENCRYPTION_KEY=KEY)
    restored.shell(RESTORE_POSTGRES, BACKUP=str(backup))
    restored.shell(RESTORE_FILES, BACKUP=str(backup))
    check_restored(restored)
