"""The migrated test database, made once and copied: migrating an empty SQLite database takes
15 s of one core, and every parallel worker of a run migrated its own at the same moment
(about 100 s of wall-clock at the start of `make test` on two cores). The first worker migrates
and keeps a copy under var/test/ named by a hash of everything the migrations depend on; the
others, and later runs, copy that file. A changed migration, dependency or index set-up gives a
new name, so a stale copy is never used."""

from __future__ import annotations

import fcntl
import hashlib
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import django
from django.conf import settings

ROOT = Path(__file__).resolve().parent.parent
TEMPLATES = ROOT / "var" / "test"


def _product() -> list[str]:
    """The top-level packages of the checkout that hold an installed app (each capability's
    app), `config`, and the plain packages beneath them: a new app's migrations change the
    template's name like an old one's."""
    from django.apps import apps

    found = {"config", "core", "agent"}
    for app in apps.get_app_configs():
        path = Path(app.path).resolve()
        if path.is_relative_to(ROOT) and ".venv" not in path.parts:
            found.add(path.relative_to(ROOT).parts[0])
    return sorted(found)


def _sources() -> Iterator[Path]:
    """What a migrated database's content follows from: the migrations, the apps' set-up
    (post_migrate handlers build the search indexes), the search index code, and the installed
    packages (their own migrations and handlers)."""
    for package in _product():
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).parts
            if "migrations" in parts or path.name == "apps.py" or parts[:2] == ("chat", "search"):
                yield path
    yield from sorted((ROOT / "knowledge").glob("lexical*.py"))
    yield ROOT / "core" / "fulltext.py"  # the search indexes' set-up statements
    yield ROOT / "requirements.txt"


def template_name() -> Path:
    digest = hashlib.sha256(django.get_version().encode())
    digest.update(repr(settings.INSTALLED_APPS).encode())
    for path in _sources():
        digest.update(str(path.relative_to(ROOT)).encode())
        digest.update(path.read_bytes())
    return TEMPLATES / f"db-{digest.hexdigest()[:16]}.sqlite3"


def _copy(source: Path, target: Path) -> None:
    """A consistent copy through SQLite itself (the source may have a write-ahead log)."""
    for leftover in (target, Path(f"{target}-wal"), Path(f"{target}-shm")):
        leftover.unlink(missing_ok=True)
    with sqlite3.connect(source) as src, sqlite3.connect(target) as dst:
        src.backup(dst)
    src.close()
    dst.close()


def setup_sqlite(verbosity: int) -> bool:
    """Sets up the default database from the template, making the template first if there is
    none; False when the database is not SQLite (the caller migrates as usual)."""
    from django.db import connections
    from django.test.utils import setup_databases

    if list(settings.DATABASES) != ["default"] or not settings.DATABASES["default"]["ENGINE"].endswith("sqlite3"):
        return False
    connection: Any = connections["default"]
    test_name = Path(connection.creation._get_test_db_name())
    template = template_name()
    TEMPLATES.mkdir(parents=True, exist_ok=True)
    with open(TEMPLATES / ".db-template.lock", "w") as held:
        # One worker migrates; the others wait here and copy what it made.
        fcntl.flock(held, fcntl.LOCK_EX)
        if not template.exists():
            setup_databases(verbosity=verbosity, interactive=False, serialized_aliases=set())
            connection.close()
            partial = template.with_suffix(f".{os.getpid()}.partial")
            _copy(test_name, partial)
            for old in TEMPLATES.glob("db-*.sqlite3"):
                old.unlink(missing_ok=True)
            partial.rename(template)
            return True
        test_name.parent.mkdir(parents=True, exist_ok=True)
        _copy(template, test_name)
    # What Django's create_test_db does once the database exists and is migrated.
    connection.close()
    settings.DATABASES["default"]["NAME"] = str(test_name)
    connection.settings_dict["NAME"] = str(test_name)
    connection.ensure_connection()
    return True


def copy_migrated(target: Path) -> bool:
    """Copies the migrated template into `target`, the SQLite file of an installation a test
    starts as processes of its own (`manage.py serve`, a backup's source), sparing it the 15 s
    of one core that migrating takes. False when the suite runs on another database (there is
    no template): the caller migrates."""
    template = template_name()
    if not template.exists():
        return False
    target.parent.mkdir(parents=True, exist_ok=True)
    _copy(template, target)
    return True


# Content types and permissions follow from the models alone, and no test makes any of its own.
KEPT_THROUGH_FLUSH = frozenset({"django_content_type", "auth_permission"})


def keep_model_rows_through_flush() -> None:
    """A transactional test ends with a flush of every table, after which Django's post_migrate
    handlers insert every content type and permission again: 0.5 s of each such test (there
    are hundreds). With those two tables kept, the two handlers would only find every row
    there already, so they are left out of the signal after a flush while the tables hold what
    they held after the handlers last ran in full (the other handlers, such as the search
    indexes' repair, always run); the ids of content types stay the same from one test to the
    next."""
    from django.contrib.auth.management import create_permissions
    from django.contrib.auth.models import Permission
    from django.contrib.contenttypes.management import create_contenttypes
    from django.contrib.contenttypes.models import ContentType
    from django.core.management import sql
    from django.core.management.commands import flush
    from django.db.models.signals import post_migrate

    # The two tables' row counts once the handlers last ran in full: a test that changed them
    # (an upgrade test migrating back and forth) has the handlers run in full again.
    complete: list[tuple[int, int]] = []

    def counts(db: str) -> tuple[int, int]:
        return ContentType.objects.using(db).count(), Permission.objects.using(db).count()

    def emit_post_migrate_signal(verbosity: int, interactive: bool, db: str, **kwargs: Any) -> None:
        if not complete or counts(db) != complete[0]:
            sql.emit_post_migrate_signal(verbosity, interactive, db, **kwargs)
            complete[:] = [counts(db)]
            return
        permissions = "django.contrib.auth.management.create_permissions"
        post_migrate.disconnect(dispatch_uid=permissions)
        post_migrate.disconnect(create_contenttypes)
        try:
            sql.emit_post_migrate_signal(verbosity, interactive, db, **kwargs)
        finally:
            post_migrate.connect(create_contenttypes)
            post_migrate.connect(create_permissions, dispatch_uid=permissions)

    def sql_flush(style: Any, connection: Any, reset_sequences: bool = True, allow_cascade: bool = False) -> Any:
        tables = connection.introspection.django_table_names(only_existing=True, include_views=False)
        kept = [table for table in tables if table not in KEPT_THROUGH_FLUSH]
        return connection.ops.sql_flush(style, kept, reset_sequences=reset_sequences, allow_cascade=allow_cascade)

    setattr(flush, "sql_flush", sql_flush)  # noqa: B010 - the stubs do not know the name
    setattr(flush, "emit_post_migrate_signal", emit_post_migrate_signal)  # noqa: B010
