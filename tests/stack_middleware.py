"""Middleware the test stack's web process runs (TESSERA_EXTRA_MIDDLEWARE, tests/conftest.py).

Transactional tests flush the database after each test, and Django then creates the content
types again, under new ids (SQLite's AUTOINCREMENT). A long-lived web process would keep the
old ids in its content-type cache, and the next admin change it logs would point at a row that
no longer exists. A deployment never flushes its database; the test stack forgets the cache
before each request instead."""

from __future__ import annotations

from typing import Any

from django.contrib.contenttypes.models import ContentType


class FreshContentTypes:
    def __init__(self, get_response: Any) -> None:
        self.get_response = get_response

    def __call__(self, request: Any) -> Any:
        ContentType.objects.clear_cache()
        return self.get_response(request)
