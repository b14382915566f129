"""An OpenAI-compatible API over Tessera's agent loop, for any OpenAI client (scripts, agent
frameworks, IDEs):

- `GET /v1/models`: the models and agents the token's user may use. A model is named by its
  display name; `tessera` is the default model; an agent is `agent/<id>` (the Researcher, the
  admin's agents) and runs as the conversation's assistant with its own instructions and tools.
- `POST /v1/chat/completions`, streaming (server-sent events) or not: a turn in a worker, as
  in the chat, with the user's toolsets, policies, approvals, limits and audit. Tessera's tools
  run server-side and show up in the answer; tools the caller passes in `tools` are offered to
  the model and, when it calls them, come back to the caller as `tool_calls` (finish reason
  `tool_calls`) for it to run and send back, as with any OpenAI model. The response's `tessera`
  field lists the server-side tool calls (name, status, duration) and the sources cited.

Auth is an API token (`Authorization: Bearer tsk_…`); a valid one always works, invalid ones
slow their address down (hub/auth.py). Off until an admin switches it on (*App settings →
OpenAI-compatible API*). Errors come in OpenAI's shape (`{"error": {"message", "type", "param", "code"}}`).

The views are coroutines, served by Django's own async handler (config/asgi.py sends `/v1/`
there): a completion waits for its turn on the event loop, holding no thread. The request's
shape is checked in hub/schema.py, the turn is started and followed in hub/turns.py (as for
`/mcp`'s agents), and a streamed answer is written by hub/openai_stream.py."""

from __future__ import annotations

import asyncio
import time
import uuid

from asgiref.sync import sync_to_async
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt

from chat.models import AppSettings
from chat.worker import fair_share
from core import strictjson

from . import caller as callers
from .caller import Caller
from .openai_stream import failure, stream
from .schema import RequestError, parse
from .turns import cancel, result_of, start, states, targets

MAX_BODY = 4_000_000


def error(status: int, message: str, type_: str, *, param: str | None = None, code: str | None = None) -> JsonResponse:
    return JsonResponse({"error": {"message": message, "type": type_, "param": param, "code": code}}, status=status)


def busy(exc: fair_share.Busy) -> JsonResponse:
    """Over the caller's share of the workers: a 429 worth retrying after Retry-After (the
    official OpenAI clients do so by themselves); no turn was started."""
    response = error(429, exc.message, "rate_limit_error", code="too_many_running")
    response["Retry-After"] = str(exc.retry_after)
    return response


async def _caller(request: HttpRequest) -> Caller | JsonResponse:
    """The API token calling (hub/caller.py), or the refusal in OpenAI's shape."""
    caller = await sync_to_async(callers.resolve)(request)
    if caller is None:
        return error(401, "Invalid or missing API token.", "authentication_error", code="invalid_api_key")
    if not (await sync_to_async(AppSettings.load)()).openai_api:
        return error(
            403, "The OpenAI-compatible API is switched off on this server.", "permission_error", code="api_disabled"
        )
    return caller


@csrf_exempt
async def not_found(request: HttpRequest) -> HttpResponse:
    return error(
        404,
        f"There is no endpoint {request.path!r}: this server has GET /v1/models and POST /v1/chat/completions.",
        "invalid_request_error",
        code="unknown_url",
    )


@csrf_exempt
async def models(request: HttpRequest) -> HttpResponse:
    if request.method != "GET":
        return error(405, "Use GET.", "invalid_request_error")
    caller = await _caller(request)
    if isinstance(caller, JsonResponse):
        return caller
    found = await sync_to_async(targets)(caller.user_id, agents=caller.agents)
    data = [
        {
            "id": target.id,
            "object": "model",
            "created": 0,
            "owned_by": "tessera",
            "tessera": {
                "kind": "agent" if target.agent else "model",
                "name": target.agent.name if target.agent else target.model.name,
                "description": target.agent.description if target.agent else "",
            },
        }
        for target in found.values()
    ]
    return JsonResponse({"object": "list", "data": data})


@csrf_exempt
async def completions(request: HttpRequest) -> HttpResponse | StreamingHttpResponse:
    if request.method != "POST":
        return error(405, "Use POST.", "invalid_request_error")
    caller = await _caller(request)
    if isinstance(caller, JsonResponse):
        return caller
    try:
        body = strictjson.loads(request.body, max_bytes=MAX_BODY)
        body, conversation = parse(body)
    except strictjson.InvalidJSON as exc:
        return error(400, f"The body is not valid JSON: {exc}", "invalid_request_error")
    except RequestError as exc:
        return error(400, exc.message, "invalid_request_error", param=exc.param)
    found = await sync_to_async(targets)(caller.user_id, agents=caller.agents)
    target = found.get(body["model"])
    if target is None:
        return error(
            404,
            f"The model {body['model']!r} does not exist or is not available to you. GET /v1/models lists them.",
            "invalid_request_error",
            param="model",
            code="model_not_found",
        )
    save = bool((body.get("tessera") or {}).get("save"))
    try:
        turn = await sync_to_async(start)(caller, target, conversation, save, f"openai: {caller.label}")
    except fair_share.Busy as exc:
        return busy(exc)
    created = int(time.time())
    completion_id = f"chatcmpl-{uuid.uuid4().hex}"
    if body.get("stream"):
        usage = bool((body.get("stream_options") or {}).get("include_usage"))
        response = StreamingHttpResponse(
            stream(
                turn, target.id, completion_id, created, usage, request.build_absolute_uri("/"), stop_on_close=not save
            ),
            content_type="text/event-stream",
        )
        response["Cache-Control"] = "no-cache"
        response["X-Accel-Buffering"] = "no"  # a proxy must pass events on as they come
        return response
    try:
        async for _ in states(turn.pk, turn.chat_id):
            pass
    except asyncio.CancelledError:
        # The caller hung up: unless the conversation is kept in the chat list, nobody will read
        # the answer, so the turn stops as at Stop.
        if not save:
            await asyncio.shield(sync_to_async(cancel)(turn.pk))
        raise
    result = await sync_to_async(result_of)(turn.pk, conversation, request.build_absolute_uri("/"))
    if result.failed:
        status, type_ = failure(result.error_kind)
        return error(status, result.error or "The turn failed.", type_, code=result.error_kind or None)
    return JsonResponse(
        {
            "id": completion_id,
            "object": "chat.completion",
            "created": created,
            "model": target.id,
            "choices": [
                {
                    "index": 0,
                    "message": {
                        "role": "assistant",
                        "content": result.content if result.content or not result.tool_calls else None,
                        **({"tool_calls": result.tool_calls} if result.tool_calls else {}),
                    },
                    "finish_reason": result.finish_reason,
                }
            ],
            "usage": result.usage,
            "tessera": result.extension,
        }
    )
