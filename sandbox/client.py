"""The caller's side of a sandbox call (the Code toolset's tool, in a turn's worker): sends the call
to the sandbox queue and follows its events until it is done.

A call waits PICKUP_S for a worker to take it. The chat's live session may be on a worker that
is gone (a machine down): then the record of it is dropped and the caller is told, and the
next call starts a new session on whichever worker takes it.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable
from typing import Any

from django.conf import settings

from core.redis_client import async_client

from . import jail, protocol

PICKUP_S = 20.0


class Unavailable(Exception):
    """No sandbox could run the call; the message says why, for the user."""


async def run(
    chat_id: int,
    code: str,
    files: list[dict[str, Any]],
    on_output: Callable[[str, str], None],
    on_notice: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """The call's `done` event (see sandbox.tasks.run_code), after handing each piece of output
    to `on_output(stream, text)` as it comes."""
    from .tasks import run_code

    redis = async_client(max_connections=2)
    call_id = uuid.uuid4().hex
    try:
        node = await redis.get(protocol.node_key(chat_id))
        seen = bool(await redis.exists(protocol.seen_key(chat_id)))
        queue = node.decode() if isinstance(node, bytes) else str(node or "") or settings.SANDBOX_QUEUE
        await asyncio.to_thread(
            run_code.apply_async, args=(call_id, chat_id, code, files, seen), queue=queue, expires=PICKUP_S * 3
        )
        return await _follow(redis, call_id, chat_id, bool(node), on_output, on_notice)
    except BaseException:
        # Stopped (or failed) while waiting: the worker stops the code, or never starts it.
        await asyncio.shield(redis.set(protocol.cancel_key(call_id), 1, ex=protocol.EVENTS_TTL_S))
        raise
    finally:
        await asyncio.shield(redis.aclose())


async def _follow(
    redis: Any,
    call_id: str,
    chat_id: int,
    routed: bool,
    on_output: Callable[[str, str], None],
    on_notice: Callable[[str], None] | None,
) -> dict[str, Any]:
    key = protocol.events_key(call_id)
    loop = asyncio.get_running_loop()
    pickup_by = loop.time() + PICKUP_S
    # Past the wall limit a worker stops the code itself; this is for a worker that died.
    finish_by = pickup_by + jail.limits().wall_s + 30
    started = False
    while True:
        now = loop.time()
        if not started and now > pickup_by:
            if routed:
                await redis.delete(protocol.node_key(chat_id))
                raise Unavailable(
                    "The sandbox that held this chat's session did not answer; its variables are gone. "
                    "Run the code again to start a new session."
                )
            raise Unavailable("No sandbox worker took the call: is a worker on the sandbox queue running?")
        if now > finish_by:
            raise Unavailable("The sandbox stopped answering while the code ran.")
        popped = await redis.blpop([key], timeout=1)
        if popped is None:
            continue
        event = json.loads(popped[1])
        kind = event.get("t")
        if kind == "started":
            started = True
        elif kind == "output":
            on_output(str(event.get("stream")), str(event.get("text", "")))
        elif kind == "notice" and on_notice is not None:
            on_notice(str(event.get("text", "")))
        elif kind == "done":
            await redis.delete(key)
            if event.get("unavailable"):
                raise Unavailable(str(event["unavailable"]))
            return dict(event)
