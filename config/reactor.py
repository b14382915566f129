"""The web process's event loop: Twisted's asyncio reactor (Daphne's) on uvloop.

Daphne installs Twisted's asyncio reactor on asyncio's own loop when it is imported, unless an
asyncio reactor is installed already; `install()` runs first (config/web.py, before it imports
Daphne) and gives it uvloop's loop, whose wake-ups, timers and socket reads cost less per
fragment pushed (bench/RESULTS.md). TESSERA_WEB_UVLOOP=false keeps asyncio's loop.
"""

from __future__ import annotations

import os
import sys
from concurrent.futures import ThreadPoolExecutor


def install() -> None:
    if os.environ.get("TESSERA_WEB_UVLOOP", "true").strip().lower() in ("0", "false", "no", "off"):
        return
    if "twisted.internet.reactor" in sys.modules:
        return  # too late: a reactor is installed already
    try:
        import uvloop
    except ImportError:
        return
    from twisted.internet import asyncioreactor

    loop = uvloop.new_event_loop()
    if "ASGI_THREADS" in os.environ:  # as Daphne does for its own loop
        loop.set_default_executor(ThreadPoolExecutor(max_workers=int(os.environ["ASGI_THREADS"])))
    asyncioreactor.install(loop)
