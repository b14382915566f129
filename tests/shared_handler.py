"""Loaded with `-p tests.shared_handler`: the test clients share one middleware stack.

Django's test client builds the whole middleware stack on its first request, as a server does
once when it starts: 40 ms of CPU each, most of it WhiteNoise indexing the built static files.
The suite makes hundreds of clients per worker (a fresh one per signed-in user in most tests),
about a minute of CPU a run. A server process serves every request through one stack; here the
clients of a worker do too, one stack per handler kind (sync or async), built by the first
client under the settings the run started with. A client made while a test overrides settings
(`override_settings`, pytest-django's `settings`) builds its own, as before, so a middleware that
reads a setting when it is made sees the override.
"""

from __future__ import annotations

from typing import Any, cast

from django.conf import settings
from django.core.handlers.base import BaseHandler
from django.test.client import AsyncClientHandler, ClientHandler

_load = BaseHandler.load_middleware
_first: dict[tuple[type, bool, tuple[str, ...]], Any] = {}
_settings: list[Any] = []  # the settings object of the run, taken on the first load


def _load_shared(self: Any, is_async: bool = False) -> None:
    current = cast(Any, settings)._wrapped
    if not _settings:
        _settings.append(current)
    a_test_client = isinstance(self, (ClientHandler, AsyncClientHandler))  # not a real server's handler
    if current is not _settings[0] or not a_test_client:
        _load(self, is_async)  # an override in force, or a real server's handler: its own stack
        return
    key = (type(self), is_async, tuple(settings.MIDDLEWARE))
    first = _first.get(key)
    if first is None:
        _load(self, is_async)
        _first[key] = self
        return
    # What load_middleware sets, taken from the first client's handler: its chain ends in that
    # handler's `_get_response`, which only reads these lists and the URL resolver, the same for
    # every handler of the kind.
    self._view_middleware = first._view_middleware
    self._template_response_middleware = first._template_response_middleware
    self._exception_middleware = first._exception_middleware
    self._middleware_chain = first._middleware_chain


BaseHandler.load_middleware = _load_shared  # type: ignore[method-assign]
