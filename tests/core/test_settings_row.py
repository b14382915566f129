"""The one-row settings models: one row at pk 1, read from the shared cache, forgotten on change."""

from __future__ import annotations

import pytest
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext

from accounts.models import AccountSettings
from chat.models import AppSettings
from core.settings_row import SettingsRow
from toolsets.files.models import FileLimits
from toolsets.models import PolicySettings

pytestmark = pytest.mark.django_db

MODELS: list[type[SettingsRow]] = [FileLimits, PolicySettings, AppSettings, AccountSettings]


@pytest.fixture(autouse=True)
def _no_cached_rows() -> None:
    for model in MODELS:
        cache.delete(model.CACHE_KEY)


@pytest.mark.parametrize("model", MODELS)
def test_a_new_instance_saves_over_the_one_row(model: type[SettingsRow]) -> None:
    model.load()
    model().save()
    model().save()
    assert list(model._default_manager.values_list("pk", flat=True)) == [1]


@pytest.mark.parametrize("model", MODELS)
def test_load_reads_the_database_once_then_the_cache(model: type[SettingsRow]) -> None:
    with CaptureQueriesContext(connection) as first:
        row = model.load()
    assert row.pk == 1 and model._default_manager.filter(pk=1).exists()
    assert len(first) >= 1
    with CaptureQueriesContext(connection) as again:
        assert model.load().pk == 1
    assert len(again) == 0
    assert isinstance(cache.get(model.CACHE_KEY), model)


def test_saving_the_row_is_seen_by_the_next_load() -> None:
    AppSettings.load()
    AppSettings(public_shares=True).save()
    assert AppSettings.load().public_shares is True
    PolicySettings.load()
    PolicySettings(approval_timeout_s=7).save()
    assert PolicySettings.load().approval_timeout_s == 7


@pytest.mark.parametrize("model", MODELS)
def test_deleting_the_row_forgets_the_cached_copy(model: type[SettingsRow]) -> None:
    model.load()
    model._default_manager.all().delete()  # admin's bulk action: no model delete() is called
    assert cache.get(model.CACHE_KEY) is None
    assert model.load().pk == 1


def test_a_stale_value_under_the_key_is_not_returned() -> None:
    cache.set(FileLimits.CACHE_KEY, {"max_file_mb": 1})
    assert isinstance(FileLimits.load(), FileLimits)


@pytest.mark.django_db(transaction=True)
def test_a_copy_cached_before_the_change_commits_is_forgotten_when_it_does() -> None:
    from django.db import transaction

    AppSettings.load()
    with transaction.atomic():
        row = AppSettings.load()
        row.mcp_server = not row.mcp_server
        row.save()
        # Another process loading the row now reads the committed (old) one and caches it.
        stale = AppSettings.objects.get(pk=1)
        stale.mcp_server = not row.mcp_server
        cache.set(AppSettings.CACHE_KEY, stale)
    assert AppSettings.load().mcp_server == row.mcp_server


def test_a_transaction_reads_its_own_change_whatever_another_process_cached_meanwhile() -> None:
    # The test's transaction never commits (pytest-django's `db`): its change stays its own.
    row = AppSettings.load()
    row.mcp_server = not row.mcp_server
    row.save()
    # Another process reads the committed row meanwhile and caches it.
    stale = AppSettings(mcp_server=not row.mcp_server)
    stale.pk = 1
    cache.set(AppSettings.CACHE_KEY, stale)
    assert AppSettings.load().mcp_server == row.mcp_server
    # What this transaction did not change still comes from the cache.
    FileLimits.load()
    with CaptureQueriesContext(connection) as queries:
        FileLimits.load()
    assert len(queries) == 0


@pytest.mark.django_db(transaction=True)
def test_outside_a_transaction_the_cache_is_used_again_after_a_rolled_back_change() -> None:
    from django.db import transaction

    with pytest.raises(RuntimeError), transaction.atomic():
        AppSettings(mcp_server=True).save()
        raise RuntimeError("rolled back")
    assert AppSettings.load().mcp_server is False
    with CaptureQueriesContext(connection) as queries:
        AppSettings.load()
    assert len(queries) == 0
