"""A row's stored file goes once the delete commits, and stays when it rolls back (core/stored_files.py)."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import FileSystemStorage
from django.db import transaction
from django.db.models.fields.files import FieldFile

from core.stored_files import delete_after_commit

pytestmark = pytest.mark.django_db(transaction=True)


class _Field:
    def __init__(self, storage: FileSystemStorage) -> None:
        self.storage = storage


def _stored(tmp_path: Any) -> FieldFile:
    storage = FileSystemStorage(location=tmp_path)
    name = storage.save("report.csv", ContentFile(b"a,b\n"))
    return FieldFile(None, _Field(storage), name)  # type: ignore[arg-type]


def test_the_file_goes_when_the_delete_commits(tmp_path: Any) -> None:
    stored = _stored(tmp_path)
    with transaction.atomic():
        delete_after_commit(stored)
        assert stored.storage.exists(str(stored.name))
    assert not stored.storage.exists(str(stored.name))


def test_the_file_stays_when_the_delete_rolls_back(tmp_path: Any) -> None:
    stored = _stored(tmp_path)
    with pytest.raises(RuntimeError), transaction.atomic():
        delete_after_commit(stored)
        raise RuntimeError("rolled back")
    assert stored.storage.exists(str(stored.name))


def test_a_row_without_a_file_asks_nothing(tmp_path: Any) -> None:
    stored = _stored(tmp_path)
    stored.name = ""
    delete_after_commit(stored)  # no error, nothing to remove
