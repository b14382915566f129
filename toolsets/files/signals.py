"""A file's stored bytes go with its row, however the row goes: deleted on its own, with its
message, or with its chat (a database cascade still sends post_delete per row)."""

from __future__ import annotations

from typing import Any

from django.db.models.signals import post_delete
from django.dispatch import receiver

from core.stored_files import delete_after_commit

from .models import Attachment


@receiver(post_delete, sender=Attachment)
def _delete_stored_file(instance: Attachment, **_: Any) -> None:
    delete_after_commit(instance.file)
