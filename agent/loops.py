"""Event loops that live as long as their process: a worker's, which runs every turn of the
process (chat/worker/loop.py). HTTP sessions made in such a loop are kept and shared by every
request made in it, and its owner closes them before the loop ends; in any other loop (a
one-off call, a test's) a request closes its own session when it is done, since the loop may
end at any moment and a session left behind on a finished loop is only finalized by the
garbage collector, with an "Unclosed client session" error (often at interpreter exit)."""

from __future__ import annotations

import asyncio

_long_lived: set[asyncio.AbstractEventLoop] = set()


def keep_sessions(loop: asyncio.AbstractEventLoop) -> None:
    _long_lived.add(loop)


def forget(loop: asyncio.AbstractEventLoop) -> None:
    _long_lived.discard(loop)


def keeps_sessions(loop: asyncio.AbstractEventLoop) -> bool:
    return loop in _long_lived
