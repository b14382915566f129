"""Upgrading a database made before the apps moved to their own packages (commit 8fc5851, the
last one with chat/accounts, chat/api and chat/agent): every migration it recorded is still there
under the same app label and name, unchanged, and rows written then (chats, shares, API tokens,
OAuth grants and tokens) are read and work after migrating to today's layout. API tokens moved
from `toolsets` to `hub` since, by state only: same table, same content type row."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from datetime import timedelta
from pathlib import Path

import pytest
from django.apps import apps
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.loader import MigrationLoader
from django.test import Client
from django.utils import timezone

ROOT = Path(__file__).resolve().parents[1]
BEFORE = "8fc5851"
# Where each old migrations folder lives now (the app keeps its label).
MOVED = {"chat/accounts/migrations/": "accounts/migrations/"}


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout


def _old_migrations() -> dict[str, str]:
    """{path at BEFORE: its text} for every migration file of the product's apps then."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    try:
        names = _git("ls-tree", "-r", "--name-only", BEFORE).split()
    except subprocess.CalledProcessError:
        pytest.skip(f"commit {BEFORE} is not in this checkout")
    paths = [n for n in names if "/migrations/" in n and n.endswith(".py") and not n.endswith("__init__.py")]
    return {path: _git("show", f"{BEFORE}:{path}") for path in paths}


def _now(path: str) -> str:
    for old, new in MOVED.items():
        if path.startswith(old):
            return new + path[len(old) :]
    return path


def test_every_migration_recorded_before_the_move_is_unchanged_under_its_label() -> None:
    old = _old_migrations()
    assert len(old) > 20  # the whole history, not a stray file
    changed = {path: _now(path) for path, text in old.items() if (ROOT / _now(path)).read_text() != text}
    assert changed == {}
    # Same label and name in the loader's graph: the rows of django_migrations still match.
    graph = MigrationLoader(None, ignore_no_migrations=True).graph
    labels = {c.path.removeprefix(str(ROOT) + "/"): c.label for c in apps.get_app_configs()}
    missing = []
    for path in old:
        folder, name = _now(path).rsplit("/migrations/", 1)
        if (labels[folder], name.removesuffix(".py")) not in graph.nodes:
            missing.append(path)
    assert missing == []


def _is_product(path: str) -> bool:
    """An app of this repository (a virtualenv inside the checkout holds the third-party ones)."""
    inside = Path(path).resolve().is_relative_to(ROOT)
    return inside and not Path(path).resolve().relative_to(ROOT).parts[0].startswith(".")


def _leaves_before() -> list[tuple[str, str]]:
    """Each app's last migration at BEFORE (every app's history is a line)."""
    labels = {c.path.removeprefix(str(ROOT) + "/"): c.label for c in apps.get_app_configs()}
    last: dict[str, str] = {}
    for path in _old_migrations():
        folder, name = _now(path).rsplit("/migrations/", 1)
        label = labels[folder]
        last[label] = max(last.get(label, ""), name.removesuffix(".py"))
    return sorted(last.items())


@pytest.mark.django_db(transaction=True)
def test_rows_written_before_the_move_work_after_it() -> None:
    executor = MigrationExecutor(connection)
    # The product's apps where they stood, apps made since (hub) unapplied; third-party apps
    # (auth, OAuth) as they are.
    leaves = dict(executor.loader.graph.leaf_nodes())
    product = {c.label for c in apps.get_app_configs() if _is_product(c.path)}
    before_leaves = dict(_leaves_before())
    targets: dict[str, str | None] = {
        **leaves,
        **{label: None for label in product & leaves.keys()},
        **before_leaves,
    }
    before = sorted(targets.items(), key=lambda t: t[0])
    executor.migrate(before)
    old = executor.loader.project_state([(a, n) for a, n in before if n]).apps

    # Written with the models as they were then.
    user = old.get_model("auth", "User").objects.create(username="upgrader", password="!", is_active=True)
    chat = old.get_model("chat", "Chat").objects.create(owner_id=user.pk, title="Kept across the move")
    old.get_model("chat", "ChatShare").objects.create(
        chat_id=chat.pk, token="s" * 24, title="Kept", turn_ids=[], public=True
    )
    secret = "tsk_" + "k" * 43
    old.get_model("toolsets", "ApiToken").objects.create(
        user_id=user.pk, name="script", token_hash=hashlib.sha256(secret.encode()).hexdigest(), hint=secret[-4:]
    )
    # API tokens were `toolsets`' then: an admin given the right to see them keeps it.
    token_type = old.get_model("contenttypes", "ContentType").objects.get(app_label="toolsets", model="apitoken")
    staff = old.get_model("auth", "User").objects.create(username="auditor", password="!", is_staff=True)
    staff.user_permissions.add(
        old.get_model("auth", "Permission").objects.get(content_type=token_type, codename="view_apitoken")
    )
    application = old.get_model("oauth2_provider", "Application").objects.create(
        name="client", client_type="public", authorization_grant_type="authorization-code", user_id=user.pk
    )
    old.get_model("oauth2_provider", "Grant").objects.create(
        user_id=user.pk,
        application_id=application.pk,
        code="g" * 30,
        expires=timezone.now() + timedelta(minutes=5),
        redirect_uri="http://127.0.0.1/cb",
        scope="mcp",
    )

    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())

    # Read with today's models and code paths.
    from oauth2_provider.models import Grant

    from chat.models import Chat, ChatShare
    from hub.models import ApiToken

    assert Chat.objects.get(pk=chat.pk).title == "Kept across the move"
    token = ApiToken.authenticate(secret)
    assert token is not None and token.user_id == user.pk
    # The token made under `toolsets` calls the execution API now served through `hub`.
    called = Client().post(
        "/toolsets/clock_math/execute/calculate",
        data={"params": {"expression": "6*7"}},
        content_type="application/json",
        headers={"Authorization": f"Bearer {secret}"},
    )
    assert called.status_code == 200, called.content
    assert ApiToken.objects.get(pk=token.pk).last_used_at is not None
    # Its content type moved, not copied: same row, so permissions and admin history follow.
    from django.contrib.auth.models import User
    from django.contrib.contenttypes.models import ContentType

    ContentType.objects.clear_cache()
    assert ContentType.objects.get_for_model(ApiToken).pk == token_type.pk
    assert not ContentType.objects.filter(app_label="toolsets", model="apitoken").exists()
    assert User.objects.get(pk=staff.pk).has_perm("hub.view_apitoken")
    assert Grant.objects.get(code="g" * 30).application_id == application.pk
    share = ChatShare.objects.get(token="s" * 24)
    assert share.chat_id == chat.pk
    # The shared link still opens (the share page reads the chat through today's code).
    from django.contrib.auth import get_user_model

    client = Client()
    client.force_login(get_user_model().objects.get(pk=user.pk))  # the password hash was kept too
    page = client.get(f"/s/{share.token}/")
    assert page.status_code == 200
    assert "Kept" in page.content.decode()
