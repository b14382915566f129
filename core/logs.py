"""Log records that say which request or turn they belong to, as readable text or one JSON
object per line (`LOG_FORMAT=json`).

The context lives in context variables: the request middleware sets the request id (and the
request, whose user is read only if a view already loaded it, so logging never costs a query),
and a worker sets the turn, chat and user ids when it claims a turn. Context variables follow a
turn into the tasks it starts and the threads its database calls run in, so every record a
turn causes carries its ids, wherever it is written from.

What goes into a record is the caller's choice: Tessera logs ids, states and error types at
INFO, never a message's text, a tool's arguments or a credential (the redacting filter on the
handler is the second wall).
"""

from __future__ import annotations

import contextvars
import json
import logging
import re
import uuid
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.http import HttpRequest, HttpResponse

from .redact import redact, redact_data

request_id: contextvars.ContextVar[str | None] = contextvars.ContextVar("request_id", default=None)
turn_id: contextvars.ContextVar[int | None] = contextvars.ContextVar("turn_id", default=None)
chat_id: contextvars.ContextVar[int | None] = contextvars.ContextVar("chat_id", default=None)
user_id: contextvars.ContextVar[int | None] = contextvars.ContextVar("user_id", default=None)
_request: contextvars.ContextVar[HttpRequest | None] = contextvars.ContextVar("log_request", default=None)

CONTEXT_FIELDS = ("request_id", "turn_id", "chat_id", "user_id")
# A request id from the client (a load balancer's) is kept only if it is short and plain: it is
# written into every record of the request.
_CLIENT_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")
# What a LogRecord has of its own; anything else on a record is an `extra=` field to keep.
_RECORD_ATTRS = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime", *CONTEXT_FIELDS}


@contextmanager
def turn_context(turn: int, chat: int | None, user: int | None) -> Iterator[None]:
    """Every record inside the block (and in tasks and threads started from it) names the turn."""
    tokens = [(turn_id, turn_id.set(turn)), (chat_id, chat_id.set(chat)), (user_id, user_id.set(user))]
    try:
        yield
    finally:
        for var, token in reversed(tokens):
            var.reset(token)


def _request_user_id(request: Any) -> int | None:
    if request is None:
        return None
    # Only a user some code already loaded: evaluating request.user here would cost a session
    # read and a query, from inside a log call.
    user = getattr(request, "_cached_user", None) or getattr(request, "_acached_user", None)
    if user is not None and getattr(user, "is_authenticated", False):
        return int(user.pk)
    return None


class ContextFilter(logging.Filter):
    """Puts the current request/turn ids on every record (None where there is none)."""

    def filter(self, record: logging.LogRecord) -> bool:
        # Django logs a request's response (django.request: 404s, 500s) after the middleware
        # has returned, with the request on the record: its id is read from there.
        request = _request.get() or getattr(record, "request", None)
        record.request_id = request_id.get() or getattr(request, "request_id", None)
        record.turn_id = turn_id.get()
        record.chat_id = chat_id.get()
        uid = user_id.get()
        record.user_id = uid if uid is not None else _request_user_id(request)
        return True


class TextFormatter(logging.Formatter):
    """The readable default, with the record's ids after the message when it has any."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        tags = " ".join(
            f"{name.removesuffix('_id')}={value}"
            for name in CONTEXT_FIELDS
            if (value := getattr(record, name, None)) is not None
        )
        if not tags:
            return text
        first, newline, rest = text.partition("\n")
        return f"{first} [{tags}]{newline}{rest}"


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, the context ids present, any
    `extra=` fields, and the traceback as one string."""

    def __init__(self) -> None:
        super().__init__()
        # Python's warnings would otherwise be written to stderr as lines of plain text.
        logging.captureWarnings(True)

    def format(self, record: logging.LogRecord) -> str:
        data: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "pid": record.process,
        }
        for name in CONTEXT_FIELDS:
            value = getattr(record, name, None)
            if value is not None:
                data[name] = value
        for name, value in vars(record).items():
            if name not in _RECORD_ATTRS and not name.startswith("_"):
                # The redacting filter sees the message and traceback, not `extra=` fields.
                data[name] = redact_data(value)
        # The traceback as the redacting filter left it.
        if record.exc_info and not record.exc_text:
            record.exc_text = redact(self.formatException(record.exc_info))
        if record.exc_text:
            data["exc_info"] = record.exc_text
        if record.stack_info:
            data["stack_info"] = redact(record.stack_info)
        return json.dumps(data, default=str, ensure_ascii=False)


def _new_request_id(request: HttpRequest) -> str:
    given = request.headers.get("X-Request-ID", "")
    return given if _CLIENT_REQUEST_ID.match(given) else uuid.uuid4().hex


Handler = Callable[[HttpRequest], HttpResponse] | Callable[[HttpRequest], Awaitable[HttpResponse]]


class RequestContextMiddleware:
    """Gives each request an id (the client's X-Request-ID when it is plain, else a new one),
    puts it on every record the request logs, and sends it back in the response."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Handler) -> None:
        self.get_response = get_response
        if iscoroutinefunction(get_response):
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> Any:
        if iscoroutinefunction(self):
            return self.__acall__(request)
        rid, tokens = self._enter(request)
        try:
            response = self.get_response(request)
        finally:
            self._leave(tokens)
        response["X-Request-ID"] = rid  # type: ignore[index]
        return response

    async def __acall__(self, request: HttpRequest) -> HttpResponse:
        rid, tokens = self._enter(request)
        try:
            response = await self.get_response(request)  # type: ignore[misc]
        finally:
            self._leave(tokens)
        response["X-Request-ID"] = rid
        return response  # type: ignore[no-any-return]

    @staticmethod
    def _enter(request: HttpRequest) -> tuple[str, list[Any]]:
        rid = _new_request_id(request)
        request.request_id = rid  # type: ignore[attr-defined]
        return rid, [(request_id, request_id.set(rid)), (_request, _request.set(request))]

    @staticmethod
    def _leave(tokens: list[Any]) -> None:
        for var, token in reversed(tokens):
            var.reset(token)
