"""A settings model of one row: the site-wide knobs an admin edits in Django admin.

Every such model is read far more often than it is changed (on every page, turn or tool call),
so `load()` keeps the row in the shared cache (Redis, seen by every web and worker process) and
any save or delete of the row clears it for all of them at once. The row is always pk 1,
whichever admin form, shell or test saves it, so there is never a second one to disagree with.

A subclass names its cache key and, if it must, how long a cached copy may live:

    class FileLimits(SettingsRow):
        CACHE_KEY = "file-limits"
        max_file_mb = models.PositiveIntegerField(default=20)
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any, ClassVar, Self

from django.core.cache import cache
from django.core.cache.backends.base import DEFAULT_TIMEOUT
from django.db import connections, models, transaction
from django.db.models.signals import class_prepared, post_delete, post_save
from django.dispatch import receiver

PK = 1
# Set while `load()` makes the row with its defaults: nothing of the caller's own to hold back.
_making_defaults: ContextVar[bool] = ContextVar("settings_row_making_defaults", default=False)


class SettingsRow(models.Model):
    """The single row of a settings model, cached; no id field of its own, so each subclass
    keeps the primary key its app gives it (and its migrations stay as they are)."""

    CACHE_KEY: ClassVar[str]
    # How long a cached copy may be used: the cache's own timeout unless a subclass says.
    # Saving or deleting clears it anyway; a shorter life only bounds a change made past the
    # ORM (a queryset update, a SQL console).
    CACHE_TIMEOUT: ClassVar[Any] = DEFAULT_TIMEOUT

    class Meta:
        abstract = True

    def save(self, *args: Any, **kwargs: Any) -> None:
        self.pk = PK  # one row, whatever admin form or shell saves it
        super().save(*args, **kwargs)

    @classmethod
    def load(cls) -> Self:
        if _changed_in_open_transaction(cls):
            # The cache holds what the other processes see (and one of them may have cached the
            # committed row again since the save), not this transaction's own change.
            return cls._default_manager.get_or_create(pk=PK)[0]
        # The row is made with its defaults the first time anything reads it.
        found = cache.get(cls.CACHE_KEY)
        if not isinstance(found, cls):  # also a copy cached by an older shape of the class
            token = _making_defaults.set(True)
            try:
                found, _ = cls._default_manager.get_or_create(pk=PK)
            finally:
                _making_defaults.reset(token)
            cache.set(cls.CACHE_KEY, found, cls.CACHE_TIMEOUT)
        return found

    @classmethod
    def forget(cls) -> None:
        """Drop the cached copy: the next `load()` reads the row again."""
        cache.delete(cls.CACHE_KEY)


def _changed_in_open_transaction(model: type[SettingsRow]) -> bool:
    """Whether this connection changed the row in a transaction it has not committed yet: its
    forget-on-commit is still queued (a rollback, or a rolled-back savepoint, drops it)."""
    connection = connections[model._default_manager.db]
    if not connection.in_atomic_block:
        return False
    # Each entry is (savepoint ids, callback, robust): Django keeps the callbacks of the open transaction.
    return any(getattr(entry[1], "settings_row", None) is model for entry in connection.run_on_commit)


def _forget(sender: type[SettingsRow], using: str = "default", created: bool = False, **_: Any) -> None:
    sender.forget()
    if not connections[using].in_atomic_block or (created and _making_defaults.get()):
        return  # committed already, or only the defaults any process would make

    # Again once the change commits: another process loading the row between the save and the
    # commit reads the old one and would cache it for the cache's whole timeout. Until then the
    # queued callback also tells `load()` to read this transaction's own row.
    def committed() -> None:
        sender.forget()

    committed.settings_row = sender  # type: ignore[attr-defined]
    transaction.on_commit(committed, using=using)


@receiver(class_prepared)
def _watch(sender: type[models.Model], **_: Any) -> None:
    # Signals rather than save()/delete() overrides: a queryset delete (admin's bulk action)
    # sends post_delete for each row but never calls the model's delete(). Abstract models are
    # never prepared, so only the concrete settings models get here.
    if issubclass(sender, SettingsRow):
        post_save.connect(_forget, sender=sender, weak=False, dispatch_uid=f"settings-row:{sender._meta.label}")
        post_delete.connect(_forget, sender=sender, weak=False, dispatch_uid=f"settings-row:{sender._meta.label}")
