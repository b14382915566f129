"""The one storage every attached file lives in (settings.STORAGES["files"]): a folder under the
data directory by default, an S3-compatible bucket when configured."""

from __future__ import annotations

from django.core.files.storage import Storage, storages


def files_storage() -> Storage:
    return storages["files"]
