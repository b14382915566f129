"""A file's stored bytes go with its row, however the row goes: deleted on its own, with its
message, or with its chat (a database cascade still sends post_delete per row)."""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction
from django.db.models.signals import post_delete
from django.dispatch import receiver

from .models import Attachment

log = logging.getLogger(__name__)


@receiver(post_delete, sender=Attachment)
def _delete_stored_file(instance: Attachment, **_: Any) -> None:
    name = instance.file.name
    storage = instance.file.storage
    if not name:
        return

    def remove() -> None:
        try:
            storage.delete(name)
        except Exception:  # a storage hiccup must not undo the delete the person asked for
            log.warning("Could not delete stored file %s", name, exc_info=True)

    # Only once the rows are really gone: a rolled-back delete keeps its file.
    transaction.on_commit(remove)
