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
person through the call's `ToolContext.elicit` (the chat's card: `chat.worker.asking`), with the
tool's own timeout paused meanwhile, and answers the server. The wait is a question of kind
"elicitation" in the one pending-question store (`core.questions`), like an approval's: any web
process answers it (`chat.question_views`), a reload shows it again, and no answer in time
cancels the question and fails the call with a clear "No answer within N minutes".

The form (the requested schema drawn, the answer parsed and checked) is `elicitation_form`'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import weakref
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import anyio
import mcp_types as types
from mcp.shared.exceptions import MCPError

from core import questions
from toolsets.base import ToolFailure

from . import untrusted
from .elicitation_form import MAX_MESSAGE, SchemaRefused, checked_schema, form_fields, link

KIND = "elicitation"
PREFIX = questions.PREFIX
POLL_S = questions.POLL_S
ACTIONS = ("accept", "decline", "cancel")
# A call may ask this many questions; a server asking more is refused (a loop, or a nuisance).
MAX_PER_CALL = 10

Action = Literal["accept", "decline", "cancel", "timeout"]


class PagesRequired(Exception):
    """A server's URL_ELICITATION_REQUIRED error (-32042): the call did not run; the user must
    open the pages it names first."""

    def __init__(self, error: MCPError) -> None:
        super().__init__(untrusted.clean_text(error.message, 300))
        self.data = error.data


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
    id: str = field(default_factory=questions.new_id)
    deadline: float = 0.0  # wall-clock time, set when the request opens


@dataclass(frozen=True)
class Answer:
    action: Action
    content: dict[str, Any] | None = None


Elicitor = Callable[[ElicitationRequest], Awaitable[Answer]]


# --- The wait: a question of kind "elicitation" in the one store (`core.questions`) -----------------


def question(request: ElicitationRequest, *, chat_id: int, turn_id: int, user_id: int) -> questions.Question:
    payload = {"chat_id": chat_id, "turn_id": turn_id, **asdict(request)}
    payload.pop("id"), payload.pop("deadline")
    return questions.Question(KIND, user_id, payload, request.timeout_s, id=request.id)


def outcome(answer: dict[str, Any] | None) -> Answer:
    """The answer stored for a question (None: nobody answered in time)."""
    if answer is None:
        return Answer("timeout")
    action = answer.get("action")
    content = answer.get("content")
    return Answer(action if action in ACTIONS else "cancel", content if isinstance(content, dict) and content else None)


async def open_request(redis: Any, request: ElicitationRequest, *, chat_id: int, turn_id: int, user_id: int) -> None:
    opened = await questions.ask(redis, question(request, chat_id=chat_id, turn_id=turn_id, user_id=user_id))
    request.deadline = opened.deadline


async def wait(redis: Any, request: ElicitationRequest, *, poll_s: float = POLL_S) -> Answer:
    """The person's answer, or `timeout` at the deadline. Cancelling the awaiting task (Stop)
    ends the wait at once."""
    asked = questions.Question(KIND, 0, {}, request.timeout_s, id=request.id, deadline=request.deadline)
    return outcome(await questions.wait(redis, asked, poll_s=poll_s))


async def close(redis: Any, request: ElicitationRequest) -> None:
    await questions.close(redis, request.id)


def pending(redis: Any, elicitation_id: str) -> questions.Question | None:
    """An open question (sync: for the web process), or None."""
    return questions.pending(redis, elicitation_id, KIND)


def answer(redis: Any, elicitation_id: str, action: str, content: dict[str, Any] | None = None) -> bool:
    """Records the answer; False if the question had already been answered (or is gone)."""
    return questions.answer(redis, elicitation_id, {"action": action, "content": content}) == "recorded"


async def completed(connection: Any, server_elicitation_id: str) -> None:
    """A server's `notifications/elicitation/complete`: the URL-mode page it named was finished
    there, which answers the card as if the person had said Done.

    The id is the server's own choice, so it is looked up only among the pages asked by calls
    in flight on the connection it arrived on (one server, and one user's credential unless the
    server is shared): another server cannot finish, or take over, a question of this one."""
    from core.redis_client import sync_client

    eid = untrusted.clean_text(server_elicitation_id, 200)
    found = {ours for handler in _in_flight.get(connection, set()) if (ours := handler.pages.get(eid))}
    if len(found) != 1:
        # Unknown, or named by two calls at once (two users of a shared server): whose page was
        # finished cannot be told, so neither card is answered for them.
        return
    (ours,) = found
    await asyncio.to_thread(answer, sync_client(), ours, "accept")


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
        # The pages this call is asking about: the server's elicitation id → the card's id.
        self.pages: dict[str, str] = {}
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
        if request.elicitation_id:
            if request.elicitation_id in self.pages:
                return types.ErrorData(code=types.INVALID_PARAMS, message="This elicitation id is already asked.")
            self.pages[request.elicitation_id] = request.id
        with anyio.CancelScope() as scope:
            self._asking.add(scope)
            try:
                with self._paused():
                    async with self._one_at_a_time:
                        # After an unanswered question nobody is there for the next one.
                        answer = Answer("timeout") if self.timed_out else await self.elicit(request)
            finally:
                self._asking.discard(scope)
                self.pages.pop(request.elicitation_id, None)
        if answer.action == "timeout":
            self.timed_out = True
            return types.ElicitResult(action="cancel")
        if answer.action != "accept":
            return types.ElicitResult(action=answer.action)
        if request.mode == "url":
            return types.ElicitResult(action="accept")
        return types.ElicitResult(action="accept", content=answer.content or {})

    def _request(self, params: types.ElicitRequestParams) -> ElicitationRequest:
        message = untrusted.clean_text(params.message, MAX_MESSAGE).strip()
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
                elicitation_id=untrusted.clean_text(params.elicitation_id, 200),
            )
        schema = params.requested_schema
        fields = form_fields(schema)
        return ElicitationRequest(
            self.server, self.tool, "form", message, self.timeout_s, fields=fields, schema=checked_schema(schema)
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
                    f"{self.server} needs the user to open a page first ({untrusted.clean_text(page.url, 300)}); "
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
