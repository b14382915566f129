"""A row's stored file goes with the row: once the delete commits (a rolled-back delete keeps its
file), and a storage hiccup is logged rather than undoing the delete the person asked for. Used
by every model whose rows own an uploaded file, from a post_delete receiver (a database cascade
still sends post_delete per row)."""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction

log = logging.getLogger(__name__)


def delete_after_commit(field_file: Any) -> None:
    name = field_file.name
    storage = field_file.storage
    if not name:
        return

    def remove() -> None:
        try:
            storage.delete(name)
        except Exception:
            log.warning("Could not delete stored file %s", name, exc_info=True)

    transaction.on_commit(remove)
