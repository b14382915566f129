"""A server asking the user during a tool call (MCP elicitation), in both protocol eras.

- Handshake era: the server sends `elicitation/create` while the call runs; the SDK hands it to
  the connection's elicitation callback (`answerer`).
- 2026-07-28: the call's result is an `InputRequiredResult` whose `inputRequests` hold the
  questions; the SDK's `Client.call_tool` dispatches each to the same callback and retries the
  call with the `inputResponses` (multi round-trip requests).

Either way the question reaches the `Handler` of the call that caused it: the call sets it in
a context variable (the MRTR path runs in the calling task), and a connection keeps the handlers
of its calls in flight (a handshake-era request arrives on the connection's own task; with one
call in flight it is that call's, with several only the context variable can tell).

The handler checks the question (a schema Tessera can draw as a form, an http(s) URL), asks the
person through the call's `ToolContext.elicit` (the chat's card: `chat.elicitations`), with the
tool's own timeout paused meanwhile, and answers the server. The wait lives in Redis, like an
approval's (`toolsets.policy.approval`): any web process answers it (`chat.elicitation_views`),
a reload shows it again, and no answer in time cancels the question and fails the call with a
clear "No answer within N minutes".

The requested schema is untrusted: only the spec's flat form (string, number, integer, boolean,
single and multiple choice) within size limits is drawn; anything else is refused with an error
the server receives. The answer is validated against the schema (jsonschema) before it goes back.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import re
import secrets
import time
import weakref
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, date, datetime
from typing import Any, Literal
from urllib.parse import urlsplit

import anyio
import jsonschema
import mcp_types as types
from django.core.exceptions import ValidationError
from django.core.validators import EmailValidator
from mcp.shared.exceptions import MCPError

from toolsets.base import ToolFailure

from . import catalog

PREFIX = "tessera:mcp:elicitation"
POLL_S = 0.25
ID_RE = re.compile(r"^[A-Za-z0-9_-]{16,64}$")
# A call may ask this many questions; a server asking more is refused (a loop, or a nuisance).
MAX_PER_CALL = 10

# What a requested schema may hold to be drawn: the spec's flat form, within bounds that keep a
# card readable and a hostile server's schema small.
MAX_SCHEMA_BYTES = 32_000
MAX_FIELDS = 30
MAX_OPTIONS = 100
MAX_TEXT = 10_000
MAX_MESSAGE = 2_000
MAX_TITLE = 200
MAX_DESCRIPTION = 1_000
MAX_URL = 2_048
NAME_RE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
FORMATS = {"email": "email", "uri": "url", "date": "date", "date-time": "datetime-local"}

Action = Literal["accept", "decline", "cancel", "timeout"]


class PagesRequired(Exception):
    """A server's URL_ELICITATION_REQUIRED error (-32042): the call did not run; the user must
    open the pages it names first."""

    def __init__(self, error: MCPError) -> None:
        super().__init__(catalog.clean_text(error.message, 300))
        self.data = error.data


class SchemaRefused(ValueError):
    """The server's requested schema is not one Tessera draws."""


@dataclass
class ElicitationRequest:
    """One question of a server, as the person is asked it."""

    server: str
    tool: str  # the tool's display name
    mode: Literal["form", "url"]
    message: str
    timeout_s: float
    fields: list[dict[str, Any]] = field(default_factory=list)  # form: see `form_fields`
    schema: dict[str, Any] = field(default_factory=dict)  # form: what the answer is checked against
    url: str = ""  # url: the page to open
    domain: str = ""  # url: its host, IDNA-encoded so look-alike letters show as what they are
    elicitation_id: str = ""  # url: the server's id, which its completion notification names
    id: str = field(default_factory=lambda: secrets.token_urlsafe(18))
    deadline: float = 0.0  # wall-clock time, set when the request opens


@dataclass(frozen=True)
class Answer:
    action: Action
    content: dict[str, Any] | None = None


Elicitor = Callable[[ElicitationRequest], Awaitable[Answer]]


# --- The form: a requested schema, drawn and checked ----------------------------------------------


def form_fields(schema: Any) -> list[dict[str, Any]]:
    """The fields of a flat requested schema, in its order; raises SchemaRefused with a reason a
    server can act on for anything else."""
    if not isinstance(schema, dict):
        raise SchemaRefused("the requested schema is not an object")
    if len(json.dumps(schema, default=str)) > MAX_SCHEMA_BYTES:
        raise SchemaRefused(f"the requested schema is larger than {MAX_SCHEMA_BYTES} bytes")
    if schema.get("type", "object") != "object":
        raise SchemaRefused("the requested schema must be of type object")
    properties = schema.get("properties")
    if not isinstance(properties, dict) or not properties:
        raise SchemaRefused("the requested schema has no properties")
    if len(properties) > MAX_FIELDS:
        raise SchemaRefused(f"the requested schema has more than {MAX_FIELDS} fields")
    required = schema.get("required") or []
    if not isinstance(required, list):
        raise SchemaRefused("`required` must be a list")
    fields = []
    for index, (name, spec) in enumerate(properties.items()):
        if not NAME_RE.match(str(name)):
            raise SchemaRefused(f"field name {str(name)[:40]!r} is not a plain name")
        if not isinstance(spec, dict):
            raise SchemaRefused(f"field {name} is not described by an object")
        fields.append(_field(index, name, spec, name in required))
    return fields


def _field(index: int, name: str, spec: dict[str, Any], required: bool) -> dict[str, Any]:
    kind = spec.get("type")
    view: dict[str, Any] = {
        "key": f"field-{index}",
        "name": name,
        "label": catalog.clean_text(spec.get("title"), MAX_TITLE).strip() or name,
        "description": catalog.clean_text(spec.get("description"), MAX_DESCRIPTION).strip(),
        "required": required,
        "type": kind,
    }
    default = spec.get("default")
    if kind == "string" and ("enum" in spec or "oneOf" in spec or "anyOf" in spec):
        view.update(kind="select", options=_options(name, spec), value=default if isinstance(default, str) else "")
    elif kind == "string":
        fmt = spec.get("format")
        if fmt is not None and fmt not in FORMATS:
            raise SchemaRefused(f"field {name}: format {str(fmt)[:40]!r} is not supported")
        view.update(
            kind="text",
            format=fmt or "",
            input_type=FORMATS.get(fmt or "", "text"),
            min_length=_bound(spec, "minLength", int),
            max_length=min(_bound(spec, "maxLength", int) or MAX_TEXT, MAX_TEXT),
            value=_shown_default(default, fmt) if isinstance(default, str) else "",
        )
    elif kind in ("number", "integer"):
        view.update(
            kind="number",
            minimum=_bound(spec, "minimum", float),
            maximum=_bound(spec, "maximum", float),
            step="1" if kind == "integer" else "any",
            value=_number_text(default) if isinstance(default, int | float) and not isinstance(default, bool) else "",
        )
    elif kind == "boolean":
        view.update(kind="boolean", value=default is True)
    elif kind == "array":
        items = spec.get("items")
        if not isinstance(items, dict) or not ("enum" in items or "anyOf" in items or "oneOf" in items):
            raise SchemaRefused(f"field {name}: only lists of choices are supported")
        chosen = default if isinstance(default, list) else []
        view.update(
            kind="multi",
            options=_options(name, items),
            value=[str(v) for v in chosen],
            min_items=_bound(spec, "minItems", int),
            max_items=_bound(spec, "maxItems", int),
        )
    elif kind == "object":
        raise SchemaRefused(f"field {name}: nested objects are not supported")
    else:
        raise SchemaRefused(f"field {name}: type {str(kind)[:40]!r} is not supported")
    if view["kind"] in ("select", "multi"):
        values = {o["value"] for o in view["options"]}
        chosen_values = view["value"] if isinstance(view["value"], list) else [view["value"]]
        for option in view["options"]:
            option["selected"] = option["value"] in chosen_values
        view["value"] = [v for v in chosen_values if v in values] if view["kind"] == "multi" else view["value"]
    return view


def _options(name: str, spec: dict[str, Any]) -> list[dict[str, Any]]:
    """Choices: `enum` (with the legacy `enumNames` titles) or titled `oneOf`/`anyOf` consts."""
    options: list[dict[str, Any]] = []
    if isinstance(spec.get("enum"), list):
        found = spec.get("enumNames")
        titles: list[Any] = found if isinstance(found, list) else []
        for i, value in enumerate(spec["enum"]):
            title = titles[i] if i < len(titles) else value
            options.append({"value": value, "label": title})
    else:
        for choice in spec.get("oneOf") or spec.get("anyOf") or []:
            if not isinstance(choice, dict) or "const" not in choice:
                raise SchemaRefused(f"field {name}: a choice without a const value")
            options.append({"value": choice["const"], "label": choice.get("title", choice["const"])})
    if not options:
        raise SchemaRefused(f"field {name}: no choices")
    if len(options) > MAX_OPTIONS:
        raise SchemaRefused(f"field {name}: more than {MAX_OPTIONS} choices")
    for option in options:
        if not isinstance(option["value"], str):
            raise SchemaRefused(f"field {name}: choices must be strings")
        option["value"] = option["value"][:MAX_TITLE]
        option["label"] = catalog.clean_text(str(option["label"]), MAX_TITLE).strip() or option["value"]
    return options


def _bound(spec: dict[str, Any], key: str, kind: type) -> Any:
    value = spec.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise SchemaRefused(f"{key} must be a number")
    return kind(value)


def _number_text(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _shown_default(value: str, fmt: str | None) -> str:
    """A default as its input shows it: a date-time input takes local-looking UTC minutes."""
    if fmt == "date-time":
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            return ""
        if moment.tzinfo is not None:
            moment = moment.astimezone(UTC)
        return moment.strftime("%Y-%m-%dT%H:%M")
    return value[:MAX_TEXT]


def parse(fields: list[dict[str, Any]], data: Any) -> tuple[dict[str, Any], dict[str, str]]:
    """A submitted form (a QueryDict: `get`, `getlist`) as the content the server asked for, and
    the errors by field key. Empty optional fields are left out."""
    content: dict[str, Any] = {}
    errors: dict[str, str] = {}
    for f in fields:
        key, kind = f["key"], f["kind"]
        if kind == "boolean":
            content[f["name"]] = data.get(key) in ("on", "true", "1")
            continue
        if kind == "multi":
            chosen = [v for v in data.getlist(key) if v]
            if chosen or f["required"]:
                content[f["name"]] = chosen
            continue
        raw = str(data.get(key, ""))
        if not raw.strip():
            if f["required"]:
                errors[key] = "This field is required."
            continue
        if kind == "number":
            try:
                number = float(raw)
            except ValueError:
                errors[key] = "Enter a number."
                continue
            if f["type"] == "integer":
                if not number.is_integer():
                    errors[key] = "Enter a whole number."
                    continue
                content[f["name"]] = int(number)
            else:
                content[f["name"]] = int(number) if number.is_integer() and "." not in raw else number
        elif kind == "text" and f["format"] == "date-time":
            try:
                moment = datetime.fromisoformat(raw)
            except ValueError:
                errors[key] = "Enter a date and time."
                continue
            moment = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
            content[f["name"]] = moment.isoformat().replace("+00:00", "Z")
        else:
            content[f["name"]] = raw
    return content, errors


def check(fields: list[dict[str, Any]], schema: dict[str, Any], content: dict[str, Any]) -> dict[str, str]:
    """The schema's own verdict on `content` (jsonschema, with format checks), by field key."""
    keys = {f["name"]: f["key"] for f in fields}
    errors: dict[str, str] = {}
    validator = jsonschema.Draft202012Validator(_checked_schema(schema), format_checker=_FORMATS)
    for error in validator.iter_errors(content):
        name = str(error.path[0]) if error.path else ""
        if error.validator == "required" and isinstance(error.validator_value, list):
            missing = [n for n in error.validator_value if n not in content]
            for n in missing:
                errors.setdefault(keys.get(n, ""), "This field is required.")
            continue
        errors.setdefault(keys.get(name, ""), _message(error))
    return errors


def _checked_schema(schema: dict[str, Any]) -> dict[str, Any]:
    # Only what describes values: a server's `$ref`s, `$id`s or other keywords have no say here.
    kept = {"type", "enum", "const", "oneOf", "anyOf", "items", "format", "minimum", "maximum"}
    kept |= {"minLength", "maxLength", "minItems", "maxItems", "uniqueItems", "pattern"}
    properties = {
        name: {k: v for k, v in spec.items() if k in kept}
        for name, spec in (schema.get("properties") or {}).items()
        if isinstance(spec, dict)
    }
    return {"type": "object", "properties": properties, "required": list(schema.get("required") or [])}


def _message(error: jsonschema.ValidationError) -> str:
    kind = error.validator
    if kind == "format":
        return {
            "email": "Enter a valid email address.",
            "uri": "Enter a full address, such as https://example.com/.",
            "date": "Enter a date (YYYY-MM-DD).",
            "date-time": "Enter a date and time.",
        }.get(str(error.validator_value), "This value has the wrong format.")
    if kind in ("minimum", "maximum"):
        return f"Enter a number {'at least' if kind == 'minimum' else 'at most'} {error.validator_value:g}."
    if kind in ("minLength", "maxLength"):
        return f"Use {'at least' if kind == 'minLength' else 'at most'} {error.validator_value} characters."
    if kind in ("minItems", "maxItems"):
        return f"Choose {'at least' if kind == 'minItems' else 'at most'} {error.validator_value}."
    if kind in ("enum", "oneOf", "anyOf", "const"):
        return "Choose one of the options."
    if kind == "pattern":
        return "This value has the wrong format."
    return catalog.clean_text(error.message, 200)


_FORMATS = jsonschema.FormatChecker(formats=())
_EMAIL = EmailValidator()


@_FORMATS.checks("email")
def _is_email(value: object) -> bool:
    if not isinstance(value, str):
        return True
    try:
        _EMAIL(value)
    except ValidationError:
        return False
    return True


@_FORMATS.checks("uri")
def _is_uri(value: object) -> bool:
    if not isinstance(value, str):
        return True
    parts = urlsplit(value)
    return bool(re.fullmatch(r"[A-Za-z][A-Za-z0-9+.-]*", parts.scheme)) and bool(parts.netloc or parts.path)


@_FORMATS.checks("date")
def _is_date(value: object) -> bool:
    if not isinstance(value, str):
        return True
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
        return False
    try:
        date.fromisoformat(value)
    except ValueError:
        return False
    return True


@_FORMATS.checks("date-time")
def _is_date_time(value: object) -> bool:
    if not isinstance(value, str):
        return True
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?([Zz]|[+-]\d{2}:\d{2})", value):
        return False
    try:
        datetime.fromisoformat(value.replace("z", "Z"))
    except ValueError:
        return False
    return True


def link(url: Any) -> tuple[str, str]:
    """A URL-mode page: (url, its domain); raises SchemaRefused unless it is plain http(s)."""
    if not isinstance(url, str) or not url or len(url) > MAX_URL:
        raise SchemaRefused("the URL is missing or too long")
    if any(ch.isspace() or not ch.isprintable() for ch in url):
        raise SchemaRefused("the URL contains spaces or control characters")
    parts = urlsplit(url)
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise SchemaRefused("only http and https URLs can be opened")
    if parts.username or parts.password:
        raise SchemaRefused("the URL carries a user name or password")
    try:
        domain = parts.hostname.encode("idna").decode("ascii")
    except UnicodeError:
        raise SchemaRefused("the URL's host name is not valid") from None
    return url, domain


# --- The wait, in Redis ----------------------------------------------------------------------------


def _key(elicitation_id: str) -> str:
    return f"{PREFIX}:{elicitation_id}"


def _answer_key(elicitation_id: str) -> str:
    return f"{PREFIX}:{elicitation_id}:answer"


def _server_key(server_elicitation_id: str) -> str:
    return f"{PREFIX}:server:{server_elicitation_id}"


async def open_request(redis: Any, request: ElicitationRequest, *, chat_id: int, turn_id: int, user_id: int) -> None:
    request.deadline = time.time() + request.timeout_s
    meta = {"chat_id": chat_id, "turn_id": turn_id, "user_id": user_id, **asdict(request)}
    ttl = int(request.timeout_s) + 120
    await redis.set(_key(request.id), json.dumps(meta, default=str), ex=ttl)
    if request.elicitation_id:
        await redis.set(_server_key(request.elicitation_id), request.id, ex=ttl)


async def wait(redis: Any, request: ElicitationRequest, *, poll_s: float = POLL_S) -> Answer:
    """The person's answer, or `timeout` at the deadline. Cancelling the awaiting task (Stop)
    ends the wait at once."""
    while True:
        raw = await redis.get(_answer_key(request.id))
        if raw:
            data = json.loads(raw)
            action = data.get("action")
            content = data.get("content")
            return Answer(action if action in ("accept", "decline", "cancel") else "cancel", content or None)
        left = request.deadline - time.time()
        if left <= 0:
            return Answer("timeout")
        await asyncio.sleep(min(poll_s, left))


async def close(redis: Any, request: ElicitationRequest) -> None:
    keys = [_key(request.id), _answer_key(request.id)]
    if request.elicitation_id:
        keys.append(_server_key(request.elicitation_id))
    await redis.delete(*keys)


def pending(redis: Any, elicitation_id: str) -> dict[str, Any] | None:
    """An open request's details (sync: for the web process), or None."""
    if not ID_RE.match(elicitation_id):
        return None
    raw = redis.get(_key(elicitation_id))
    return json.loads(raw) if raw else None


def answer(redis: Any, elicitation_id: str, action: str, content: dict[str, Any] | None = None) -> bool:
    """Records the answer; False if the request had already been answered."""
    payload = json.dumps({"action": action, "content": content})
    return bool(redis.set(_answer_key(elicitation_id), payload, nx=True, ex=600))


async def completed(server_elicitation_id: str) -> None:
    """A server's `notifications/elicitation/complete`: the URL-mode page it named was finished
    there, which answers the card as if the person had said Done."""
    from core.redis_client import sync_client

    def mark() -> None:
        redis = sync_client()
        found = redis.get(_server_key(server_elicitation_id[:200]))
        if found:
            ours = found.decode() if isinstance(found, bytes) else str(found)
            answer(redis, ours, "accept")

    await asyncio.to_thread(mark)


# --- Routing a server's question to the call that caused it ----------------------------------------

_current: contextvars.ContextVar[Handler | None] = contextvars.ContextVar("mcp_elicitation_handler", default=None)
_in_flight: weakref.WeakKeyDictionary[Any, set[Handler]] = weakref.WeakKeyDictionary()


class Handler:
    """One tool call's questions: asks its person (`ctx.elicit`) with the tool's clock paused."""

    def __init__(self, server: str, tool: str, elicit: Elicitor | None, clock: Any, timeout_s: float) -> None:
        self.server, self.tool, self.elicit, self.clock = server, tool, elicit, clock
        self.timeout_s = timeout_s
        self.asked = 0
        self.timed_out = False
        self._waiting = 0
        self._left = 0.0
        self._asking: set[anyio.CancelScope] = set()
        # A call's card shows one question at a time: a 2026 server may send several at once.
        self._one_at_a_time = asyncio.Lock()

    @property
    def wait_budget(self) -> float:
        """How long the call's questions may keep the server's answer in total (the SDK's read
        timeout must allow for it in the handshake era, where the call waits on the question)."""
        return self.timeout_s * MAX_PER_CALL if self.elicit is not None else 0.0

    async def __call__(self, params: types.ElicitRequestParams) -> types.ElicitResult | types.ErrorData:
        if self.elicit is None:
            return types.ErrorData(
                code=types.INVALID_REQUEST,
                message="Nobody can answer this question: the call was not made from a chat.",
            )
        if self.timed_out:
            return types.ElicitResult(action="cancel")  # nobody is there: the first question went unanswered
        self.asked += 1
        if self.asked > MAX_PER_CALL:
            return types.ErrorData(code=types.INVALID_REQUEST, message=f"At most {MAX_PER_CALL} questions per call.")
        try:
            request = self._request(params)
        except SchemaRefused as exc:
            return types.ErrorData(code=types.INVALID_PARAMS, message=f"Tessera cannot ask this: {exc}.")
        answer = Answer("cancel")  # unless answered: the call ended while it asked
        with anyio.CancelScope() as scope:
            self._asking.add(scope)
            try:
                with self._paused():
                    async with self._one_at_a_time:
                        # After an unanswered question nobody is there for the next one.
                        answer = Answer("timeout") if self.timed_out else await self.elicit(request)
            finally:
                self._asking.discard(scope)
        if answer.action == "timeout":
            self.timed_out = True
            return types.ElicitResult(action="cancel")
        if answer.action != "accept":
            return types.ElicitResult(action=answer.action)
        if request.mode == "url":
            return types.ElicitResult(action="accept")
        return types.ElicitResult(action="accept", content=answer.content or {})

    def _request(self, params: types.ElicitRequestParams) -> ElicitationRequest:
        message = catalog.clean_text(params.message, MAX_MESSAGE).strip()
        if isinstance(params, types.ElicitRequestURLParams):
            url, domain = link(params.url)
            return ElicitationRequest(
                self.server,
                self.tool,
                "url",
                message,
                self.timeout_s,
                url=url,
                domain=domain,
                elicitation_id=catalog.clean_text(params.elicitation_id, 200),
            )
        schema = params.requested_schema
        fields = form_fields(schema)
        return ElicitationRequest(
            self.server, self.tool, "form", message, self.timeout_s, fields=fields, schema=_checked_schema(schema)
        )

    @contextlib.contextmanager
    def _paused(self) -> Iterator[None]:
        """The tool's timeout measures the server's work, not the person's thinking: its clock
        (an `asyncio.Timeout`) stops while any question of the call waits."""
        clock = self.clock
        loop = asyncio.get_running_loop()
        if self._waiting == 0 and clock is not None and clock.when() is not None:
            self._left = max(1.0, clock.when() - loop.time())
            clock.reschedule(None)
        self._waiting += 1
        try:
            yield
        finally:
            self._waiting -= 1
            if self._waiting == 0 and clock is not None and not clock.expired():
                clock.reschedule(loop.time() + self._left)

    async def visit_first(self, needed: PagesRequired) -> None:
        """Asks the user to open each page a URL_ELICITATION_REQUIRED error names; returns when
        all were done, else fails the call with why."""
        try:
            pages = types.ElicitationRequiredErrorData.model_validate(needed.data).elicitations
        except ValueError:
            raise ToolFailure(f"{self.server} refused the call: {needed}") from None
        for page in pages[:MAX_PER_CALL]:
            said = await self(page)
            if self.timed_out:
                raise ToolFailure(self.timeout_message(), error_type="timeout_error", fault=False)
            if isinstance(said, types.ErrorData):
                raise ToolFailure(f"{self.server} refused the call until a page is visited: {said.message}")
            if said.action != "accept":
                raise ToolFailure(
                    f"{self.server} needs the user to open a page first ({catalog.clean_text(page.url, 300)}); "
                    f"they answered {said.action}, so the call did not run.",
                    error_type="permission_denied",
                )

    def end(self) -> None:
        """The call is over (answered, failed, stopped): a question still open is withdrawn. A
        handshake-era question waits on the connection's task, which Stop does not cancel."""
        for scope in list(self._asking):
            scope.cancel()

    def timeout_message(self) -> str:
        minutes = self.timeout_s / 60
        span = f"{minutes:g} minute{'s' if minutes != 1 else ''}" if self.timeout_s >= 60 else f"{self.timeout_s:g} s"
        return (
            f"No answer within {span}: {self.server} asked the user a question during this call and nobody "
            "answered, so the question was cancelled."
        )


@contextlib.contextmanager
def calling(connection: Any, handler: Handler) -> Iterator[None]:
    """Marks `handler` as the one whose call runs on `connection` (from this task) meanwhile."""
    token = _current.set(handler)
    handlers = _in_flight.setdefault(connection, set())
    handlers.add(handler)
    try:
        yield
    finally:
        handlers.discard(handler)
        _current.reset(token)
        handler.end()


def answerer(connection: Any) -> Any:
    """The SDK elicitation callback of one connection (both eras go through it)."""

    async def answer_question(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult | types.ErrorData:
        handlers = _in_flight.get(connection, set())
        found = _current.get()
        if found is None or found not in handlers:
            # A handshake-era request arrives on the connection's task: with one call in flight
            # it is that call's; with several, guessing could show one person another's question.
            found = next(iter(handlers)) if len(handlers) == 1 else None
        if found is None:
            return types.ErrorData(
                code=types.INVALID_REQUEST, message="This question does not belong to a call Tessera is making."
            )
        return await found(params)

    return answer_question
