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

Auth is an API token (`Authorization: Bearer tsk_…`), counted by the sign-in throttle like any
token. Off until an admin switches it on (*App settings → OpenAI-compatible API*). Errors come in
OpenAI's shape (`{"error": {"message", "type", "param", "code"}}`).

The views are coroutines, served by Django's own async handler (config/asgi.py sends `/v1/`
there): a completion waits for its turn on the event loop, holding no thread."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.db import transaction
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt

from core import strictjson
from core.redis_client import async_client
from toolsets.auth import token_from
from toolsets.base import qualified_name
from toolsets.models import ApiToken, ToolExecution
from toolsets.registry import resolve

from .. import citations, summaries
from .. import selection as sel
from ..agents import AgentSpec
from ..agents import registry as agent_registry
from ..events import group_name
from ..exchanges import start_turn, title_from
from ..live import LiveTurn
from ..models import AppSettings, Chat, LLMModel, Message, Turn, UserChatDefaults
from ..presenters.cards import tool_display_name
from .schema import Conversation, RequestError, parse

DEFAULT_MODEL = "tessera"
AGENT_PREFIX = "agent/"
MAX_BODY = 4_000_000
# How long a stream waits for news before looking at the turn again (a worker that died is
# closed by the reaper, which publishes like any worker).
WAKE_S = 2.0


def error(status: int, message: str, type_: str, *, param: str | None = None, code: str | None = None) -> JsonResponse:
    return JsonResponse({"error": {"message": message, "type": type_, "param": param, "code": code}}, status=status)


@dataclass
class Target:
    """What a request's `model` names: the model that answers and, for an agent, the agent."""

    id: str
    model: LLMModel
    agent: AgentSpec | None = None


def targets(user_id: int, *, agents: bool = True) -> dict[str, Target]:
    """The models and agents this user may ask for, by id (blocking); agents only for a token
    that may run them."""
    # The models open to this user (enabled, and for their groups), as the chat's picker offers.
    models = list(LLMModel.for_user(user_id).order_by("-is_default", "id"))
    if not models:
        return {}
    found: dict[str, Target] = {DEFAULT_MODEL: Target(DEFAULT_MODEL, models[0])}
    by_pk = {m.pk: m for m in models}
    for model in models:
        found.setdefault(model.name, Target(model.name, model))
    app = AppSettings.load()
    for agent_id, state in agent_registry.availability(user_id).items() if agents else ():
        if state.usable and app.exposes("openai_api", "agents", agent_id):
            model = by_pk.get(state.agent.model_id or 0, models[0])
            name = AGENT_PREFIX + agent_id
            found[name] = Target(name, model, state.agent)
    return found


async def _user(request: HttpRequest) -> tuple[Any, ApiToken | None, JsonResponse | None]:
    record = await sync_to_async(token_from)(request)
    if record is None:
        return None, None, error(401, "Invalid or missing API token.", "authentication_error", code="invalid_api_key")
    if not (await sync_to_async(AppSettings.load)()).openai_api:
        return (
            None,
            None,
            error(
                403,
                "The OpenAI-compatible API is switched off on this server.",
                "permission_error",
                code="api_disabled",
            ),
        )
    await ApiToken.objects.filter(pk=record.pk).aupdate(last_used_at=timezone.now())
    return record.user, record, None


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
    user, record, denied = await _user(request)
    if denied is not None:
        return denied
    found = await sync_to_async(targets)(user.pk, agents=record is not None and record.may_use_agents)
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
    user, record, denied = await _user(request)
    if denied is not None:
        return denied
    try:
        body = strictjson.loads(request.body, max_bytes=MAX_BODY)
        body, conversation = parse(body)
    except strictjson.InvalidJSON as exc:
        return error(400, f"The body is not valid JSON: {exc}", "invalid_request_error")
    except RequestError as exc:
        return error(400, exc.message, "invalid_request_error", param=exc.param)
    found = await sync_to_async(targets)(user.pk, agents=record is not None and record.may_use_agents)
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
    client = f"openai: token {record.name}" if record is not None else "openai"
    tools = record is not None and record.may_use_tools
    agents = record is not None and record.may_use_agents
    turn = await sync_to_async(start)(user, target, conversation, save, client, tools, agents)
    created = int(time.time())
    completion_id = f"chatcmpl-{uuid.uuid4().hex}"
    if body.get("stream"):
        usage = bool((body.get("stream_options") or {}).get("include_usage"))
        response = StreamingHttpResponse(
            _stream(
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
        status, type_ = _failure(result.error_kind)
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


def start(
    user: Any,
    target: Target,
    conversation: Conversation,
    save: bool,
    client: str = "openai",
    tools: bool = True,
    agents: bool = True,
) -> Turn:
    """A chat (listed only when the caller asked to keep it) and its one turn, queued. Without
    `tools` (a token that may not run them) a model answers with none of Tessera's tools; an
    agent always has its own (the token may run agents)."""
    agent = target.agent
    if agent is not None:
        selection = _agent_selection(user, agent)
    elif tools:
        defaults = UserChatDefaults.objects.filter(user=user).first()
        selection = sel.clean(defaults.enabled_tools) if defaults else sel.default_selection()
    else:
        selection = {}
    if not agents:
        selection.pop(sel.AGENTS, None)  # no subagents for a token that may not run agents
    # Only what the admin exposes over this API (an agent asked for by name is its own choice).
    app = AppSettings.load()
    if agent is None:
        selection = {
            key: ([a for a in names if app.exposes("openai_api", "agents", a)] if key == sel.AGENTS else names)
            for key, names in selection.items()
            if key == sel.AGENTS or app.exposes("openai_api", "toolsets", key)
        }
    api = {
        "messages": conversation.messages,
        "system": conversation.system,
        "tools": conversation.tools,
        "agent": agent.id if agent else "",
        "client": client[:200],
    }
    with transaction.atomic():
        chat = Chat.objects.create(
            owner=user,
            model=target.model,
            enabled_tools=selection,
            listed=save,
            title=title_from(conversation.question or "API conversation"),
        )
        _, turn = start_turn(
            chat, conversation.question, parent=None, model=target.model, metadata={"api": True}, api=api
        )
    return turn


def _agent_selection(user: Any, agent: AgentSpec) -> dict[str, list[str]]:
    """An agent works with its own toolsets (every tool of each), or, a general agent, with the
    user's default selection for new chats."""
    from toolsets.registry import all_toolsets

    if agent.toolsets is None:
        defaults = UserChatDefaults.objects.filter(user=user).first()
        chosen = sel.clean(defaults.enabled_tools) if defaults else sel.default_selection()
        return {k: list(v) for k, v in chosen.items() if k != sel.AGENTS}
    known = all_toolsets()
    return {t: [tool.name for tool in known[t].tools] for t in agent.toolsets if t in known}


_clients: dict[int, Any] = {}


def _redis() -> Any:
    """One Redis client per event loop (the web process has one)."""
    loop = asyncio.get_running_loop()
    client = _clients.get(id(loop))
    if client is None:
        client = _clients[id(loop)] = async_client(max_connections=32)
    return client


async def states(turn_id: int, chat_id: int) -> AsyncIterator[LiveTurn]:
    """The turn's live state each time it changes, until it has ended. Woken by the fragments
    its worker publishes to the chat's group (no polling while it streams)."""
    layer = get_channel_layer()
    channel = await layer.new_channel()
    group = group_name(chat_id)
    await layer.group_add(group, channel)
    redis = _redis()
    try:
        while True:
            state = await LiveTurn.aload(redis, turn_id)
            if state is not None:
                yield state
                if state.status not in ("queued", "running"):
                    return
            elif not await _active(turn_id):
                return
            try:
                await asyncio.wait_for(layer.receive(channel), WAKE_S)
            except TimeoutError:
                pass
    finally:
        await layer.group_discard(group, channel)


def cancel(turn_id: int) -> None:
    """The caller went away or cancelled: the turn stops as at Stop in the chat (blocking)."""
    from .. import live

    if not Turn.cancel_if_queued(turn_id):
        live.request_cancel(turn_id)


async def _active(turn_id: int) -> bool:
    status = await Turn.objects.filter(pk=turn_id).values_list("status", flat=True).afirst()
    return status in Turn.ACTIVE


def _delta(state: LiveTurn, sent: dict[int, int], order: list[int]) -> str:
    """The main conversation's text that arrived since the last call (`sent`: characters sent
    per step); steps are separated by a blank line, as in the final answer."""
    out: list[str] = []
    for step in state.steps:
        if not step.text:
            continue
        done = sent.get(step.index, 0)
        if done == 0 and order and step.index not in order:
            out.append("\n\n")
        if step.index not in order:
            order.append(step.index)
        if len(step.text) > done:
            out.append(step.text[done:])
            sent[step.index] = len(step.text)
    return "".join(out)


def _chunk(completion_id: str, created: int, model: str, delta: dict[str, Any], finish: str | None) -> bytes:
    payload = {
        "id": completion_id,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return b"data: " + json.dumps(payload).encode() + b"\n\n"


def _failure(error_kind: str) -> tuple[int, str]:
    """A failed turn's HTTP status and OpenAI error type: a used-up budget is the caller's quota
    (429 insufficient_quota, as OpenAI answers it: not worth retrying until the reset), a rate
    limit a 429 worth retrying, anything else the provider's failure (502)."""
    if error_kind == "budget":
        return 429, "insufficient_quota"
    if error_kind == "rate_limit":
        return 429, "api_error"
    return 502, "api_error"


async def _stream(
    turn: Turn,
    model: str,
    completion_id: str,
    created: int,
    usage: bool,
    base_url: str = "",
    *,
    stop_on_close: bool = True,
) -> AsyncIterator[bytes]:
    yield _chunk(completion_id, created, model, {"role": "assistant", "content": ""}, None)
    sent: dict[int, int] = {}
    order: list[int] = []
    finished = False
    try:
        async for state in states(turn.pk, turn.chat_id):
            text = _delta(state, sent, order)
            if text:
                yield _chunk(completion_id, created, model, {"content": text}, None)
        finished = True
    finally:
        if not finished and stop_on_close:
            # The caller closed the stream and the conversation is in no chat list: nobody will
            # read the rest, so the turn stops as at Stop. A kept one runs on, as a chat does
            # when its page is closed.
            await asyncio.shield(sync_to_async(cancel)(turn.pk))
    result = await sync_to_async(result_of)(turn.pk, None, base_url)
    if result.failed:
        problem = {
            "message": result.error or "The turn failed.",
            "type": _failure(result.error_kind)[1],
            "code": result.error_kind,
        }
        yield b"data: " + json.dumps({"error": problem}).encode() + b"\n\n"
        return
    if result.tool_calls:
        calls = [{"index": i, **call} for i, call in enumerate(result.tool_calls)]
        yield _chunk(completion_id, created, model, {"tool_calls": calls}, None)
    last = json.loads(_chunk(completion_id, created, model, {}, result.finish_reason)[6:])
    last["tessera"] = result.extension
    yield b"data: " + json.dumps(last).encode() + b"\n\n"
    if usage:
        tail = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [],
            "usage": result.usage,
        }
        yield b"data: " + json.dumps(tail).encode() + b"\n\n"
    yield b"data: [DONE]\n\n"


@dataclass
class Result:
    content: str
    tool_calls: list[dict[str, Any]]
    finish_reason: str
    usage: dict[str, int]
    extension: dict[str, Any]
    failed: bool = False
    error: str = ""
    error_kind: str = ""


def _summary(execution: ToolExecution) -> str:
    found = resolve(qualified_name(execution.toolset, execution.tool))
    if execution.status == ToolExecution.Status.SUCCESS:
        return summaries.summarize(found[1] if found else None, execution.result)
    return summaries.summarize_error(execution.error) if execution.error else execution.status


def _absolute(url: str, base_url: str) -> str:
    """A source's link as a caller elsewhere can open it (a page of this site made absolute)."""
    if url.startswith("/") and not url.startswith("//") and base_url:
        return base_url.rstrip("/") + url
    return url


def result_of(turn_id: int, conversation: Conversation | None, base_url: str = "") -> Result:
    """The finished turn as OpenAI's response has it (blocking: from a thread). `base_url`
    makes links to this site's pages absolute."""
    turn = Turn.objects.get(pk=turn_id)
    answers = list(
        Message.objects.filter(turn_id=turn_id, lane="", role=Message.Role.ASSISTANT)
        .order_by("id")
        .only("content", "tool_calls", "finish_reason")
    )
    client = {t["function"]["name"] for t in (turn.api or {}).get("tools") or []}
    calls = [
        {
            "id": c["id"],
            "type": "function",
            "function": {"name": c["function"]["name"], "arguments": c["function"]["arguments"]},
        }
        for c in ((answers[-1].tool_calls or []) if answers else [])
        if c.get("function", {}).get("name") in client
    ]
    content = "\n\n".join(m.content for m in answers if m.content.strip())
    prompt = int((turn.usage or {}).get("prompt_tokens", 0))
    completion = int((turn.usage or {}).get("completion_tokens", 0))
    executions = list(ToolExecution.objects.filter(turn_id=turn_id).order_by("id"))
    extension = {
        "chat_id": turn.chat_id,
        "turn_id": turn.pk,
        # What the chat's tool cards would say about each server-side call.
        "tool_calls": [
            {
                "toolset": e.toolset,
                "tool": e.tool,
                "name": tool_display_name(qualified_name(e.toolset, e.tool)),
                "status": e.status,
                "summary": _summary(e),
                "duration_ms": e.duration_ms,
                "lane": e.lane,
            }
            for e in executions
        ],
        # The sources the answer's [n] citations refer to, numbered as in the chat.
        "sources": [
            {
                "n": s["n"],
                "title": s["title"],
                "url": _absolute(s.get("url") or "", base_url),
                "kind": s.get("kind", ""),
                "snippet": s.get("snippet", ""),
            }
            for s in citations.from_executions(executions)
        ],
    }
    failed = turn.status not in (Turn.Status.COMPLETED,) and not (turn.status == Turn.Status.CANCELLED and content)
    finish = "tool_calls" if calls else (answers[-1].finish_reason if answers and answers[-1].finish_reason else "stop")
    return Result(
        content=content,
        tool_calls=calls,
        finish_reason=finish if finish in ("stop", "length", "tool_calls", "content_filter") else "stop",
        usage={"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
        extension=extension,
        failed=failed,
        error=turn.error,
        error_kind=turn.error_kind,
    )
