"""Django's ASGI handler with its middleware chain run synchronously: one hop from the event
loop to the sync thread per request.

Every Tessera view is synchronous. In its async mode Django runs each sync-only hook of each
middleware (process_request, process_view, process_response of the session, CSRF, auth,
messages… middleware) through its own `sync_to_async`: about 36 hops between the event loop and
the sync thread for one send, each copying and restoring every context variable. That was about
a third of a send's CPU in the web process (bench/RESULTS.md), and a send is what the web
process is busiest with when many chats start at once. Here the whole chain and the view run in
one hop, as under WSGI; the rest (reading the body, the request signals, sending the response,
a client that disconnects) is Django's ASGI handler as it is.
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIHandler
from django.core.handlers.base import BaseHandler
from django.http import HttpRequest


class SyncChainASGIHandler(ASGIHandler):
    def __init__(self) -> None:
        BaseHandler.__init__(self)
        # Sync mode: the chain is plain calls; an async view (none so far) would be run by
        # Django's sync path through async_to_sync.
        self.load_middleware(is_async=False)

    async def get_response_async(self, request: HttpRequest) -> Any:
        # Thread-sensitive, as Django runs sync views: one thread for all of them, where
        # database connections and thread-locals stay put.
        return await sync_to_async(self.get_response, thread_sensitive=True)(request)


def get_application() -> SyncChainASGIHandler:
    import django

    django.setup(set_prefix=False)
    return SyncChainASGIHandler()
