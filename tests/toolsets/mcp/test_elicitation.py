"""A server's questions during a tool call (elicitation), against real servers: the SDK server
in tests/toolsets/mcp/elicitation_server.py in both eras (handshake: `elicitation/create`;
2026-07-28: `InputRequiredResult` retried with `inputResponses`), and the protocol's own
test server (npm @modelcontextprotocol/server-everything) over stdio and streamable HTTP."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio
from django.conf import settings
from django.http import QueryDict

from tests.stdio_servers import forked
from toolsets.executor import Execution, execute
from toolsets.mcp import elicitation, elicitation_form
from toolsets.mcp.discovery import refresh
from toolsets.mcp.elicitation import Answer, ElicitationRequest
from toolsets.registry import all_toolsets

from .conftest import free_port, register, serve

pytestmark = pytest.mark.django_db(transaction=True)

SERVER = Path(__file__).with_name("elicitation_server.py")
ROOT = Path(__file__).resolve().parents[3]
EVERYTHING = ROOT / "node_modules/@modelcontextprotocol/server-everything/dist/index.js"


class Person:
    """Answers each question as scripted: an action, and for a form what they typed (submitted
    through the same parsing and checking as the card's POST)."""

    def __init__(self, *answers: tuple[str, dict[str, Any] | None]) -> None:
        self.answers = list(answers)
        self.asked: list[ElicitationRequest] = []

    async def __call__(self, request: ElicitationRequest) -> Answer:
        self.asked.append(request)
        action, typed = self.answers.pop(0)
        if action != "accept" or request.mode == "url":
            return Answer(action)  # type: ignore[arg-type]
        # What the card's form sends: its defaults, then what the person typed over them.
        values: dict[str, Any] = {}
        for f in request.fields:
            if f["kind"] == "boolean":
                values[f["name"]] = "on" if f["value"] else None
            else:
                values[f["name"]] = f["value"]
        values.update(typed or {})
        form = QueryDict(mutable=True)
        by_name = {f["name"]: f["key"] for f in request.fields}
        for name, value in values.items():
            for item in value if isinstance(value, list) else [value]:
                if item is not None:
                    form.appendlist(by_name[name], item)
        content, errors = elicitation_form.parse(request.fields, form)
        errors = errors or elicitation_form.check(request.fields, request.schema, content)
        assert not errors, errors
        return Answer("accept", content)


@pytest.fixture(scope="module")
def asking_server() -> Iterator[Callable[[str], int]]:
    """The asking server over HTTP in an era, by its port: one process an era for the module,
    started when a test first needs it (starting one is a Python with the SDK, seconds on a
    busy machine; the server keeps nothing from one call to the next)."""
    ports: dict[str, int] = {}
    with ExitStack() as running:

        def port(era: str) -> int:
            if era not in ports:
                legacy = ("legacy",) if era == "handshake" else ()
                server = serve(SERVER, "http", "{port}", *legacy)
                ports[era] = next(server)
                running.callback(server.close)
            return ports[era]

        yield port


@pytest.fixture(params=["handshake", "mrtr", "mrtr-stdio"])
def era(request: pytest.FixtureRequest, asking_server: Callable[[str], int]) -> Iterator[str]:
    """The asking server as a handshake-era HTTP server (sessions, no `server/discover`), or a
    2026-07-28 one over HTTP or stdio; yields the era its answers name."""
    if request.param == "mrtr-stdio":
        server = register(name="Asking", slug="ask", transport="stdio", **forked(SERVER), timeout_s=10)
        assert server.protocol_version == "2026-07-28", server.refresh_message
        yield "mrtr"
        return
    url = f"http://127.0.0.1:{asking_server(request.param)}/mcp"
    server = register(name="Asking", slug="ask", transport="http", url=url, timeout_s=10)
    for _ in range(5):  # a busy machine may take a while to start the server
        if server.protocol_version:
            break
        time.sleep(2)
        refresh(server, None)
        all_toolsets()
        server.refresh_from_db()
    assert server.protocol_version == ("2025-11-25" if request.param == "handshake" else "2026-07-28"), (
        server.refresh_message
    )
    yield request.param


async def call(user: Any, tool: str, arguments: dict[str, Any], person: Any, slug: str = "ask") -> Execution:
    return await execute(
        f"toolset__mcp_{slug}__{tool}",
        arguments,
        user_id=user.pk,
        tool_call_id="c1",
        pre_approved=True,
        elicit=person,
    )


def said(execution: Execution) -> str:
    assert execution.error is None, execution.error
    return str(execution.result["content"][0]["text"])


TYPED = {
    "name": "Ada Lovelace",
    "email": "ada@example.com",
    "site": "https://ada.example/",
    "born": "1815-12-10",
    "call_at": "2026-11-25T14:30",
    "age": "36",
    "budget": "12.5",
    "subscribe": "on",
    "size": "l",
    "colour": "g",
    "toppings": ["egg"],
}


async def test_a_filled_form_reaches_the_server(user: Any, era: str) -> None:
    person = Person(("accept", TYPED))
    execution = await call(user, "ask", {"form": "contact"}, person)
    text = said(execution)
    assert text.startswith(f"{era} accept: ")
    assert json.loads(text.split(": ", 1)[1]) == {
        "name": "Ada Lovelace",
        "email": "ada@example.com",
        "site": "https://ada.example/",
        "born": "1815-12-10",
        "call_at": "2026-11-25T14:30:00Z",
        "age": 36,
        "budget": 12.5,
        "subscribe": True,
        "size": "l",
        "colour": "g",
        "toppings": ["egg"],
    }
    (asked,) = person.asked
    assert asked.mode == "form" and asked.server == "Asking"
    kinds = {f["name"]: (f["kind"], f.get("input_type")) for f in asked.fields}
    assert kinds["email"] == ("text", "email") and kinds["born"] == ("text", "date")
    assert kinds["call_at"] == ("text", "datetime-local") and kinds["site"] == ("text", "url")
    assert kinds["age"][0] == "number" and kinds["subscribe"][0] == "boolean"
    assert kinds["size"][0] == "select" and kinds["toppings"][0] == "multi"
    colour = next(f for f in asked.fields if f["name"] == "colour")
    assert [(o["value"], o["label"]) for o in colour["options"]] == [("r", "Red"), ("g", "Green")]
    budget = next(f for f in asked.fields if f["name"] == "budget")
    assert budget["value"] == "10.5" and budget["minimum"] == 0.5


@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_decline_and_cancel_reach_the_server(user: Any, era: str, action: str) -> None:
    execution = await call(user, "ask", {"form": "contact"}, Person((action, None)))
    assert said(execution) == f"{era} {action}: null"


async def test_a_page_to_open_is_shown_and_done_is_sent(user: Any, era: str) -> None:
    person = Person(("accept", None))
    execution = await call(user, "visit", {"url": "https://bank.example/login?next=%2Fpay"}, person)
    assert said(execution) == f"{era} accept: null"
    (asked,) = person.asked
    assert (asked.mode, asked.url, asked.domain) == ("url", "https://bank.example/login?next=%2Fpay", "bank.example")
    assert asked.message == "Sign in at the bank."
    if era == "handshake":
        # 2026-07-28 drops the id: an MRTR question is answered by the retried call itself.
        assert asked.elicitation_id == "visit-1"


async def test_a_look_alike_domain_is_shown_as_what_it_is(user: Any, era: str) -> None:
    person = Person(("decline", None))
    await call(user, "visit", {"url": "https://аpple.com/"}, person)  # a Cyrillic "а"
    assert person.asked[0].domain == "xn--pple-43d.com"


@pytest.mark.parametrize("url", ["javascript:alert(1)", "file:///etc/passwd", "https://user:pw@bank.example/"])
async def test_a_page_that_is_not_plain_http_is_refused_unasked(user: Any, era: str, url: str) -> None:
    person = Person()
    execution = await call(user, "visit", {"url": url}, person)
    assert person.asked == []
    assert execution.error is not None and "Tessera cannot ask this" in execution.error.message


@pytest.mark.parametrize(("form", "reason"), [("nested", "nested objects"), ("huge", "larger than")])
async def test_a_schema_tessera_cannot_draw_is_refused_unasked(user: Any, era: str, form: str, reason: str) -> None:
    person = Person()
    execution = await call(user, "ask", {"form": form}, person)
    assert person.asked == []
    assert execution.error is not None and reason in execution.error.message


async def test_a_call_nobody_can_answer_is_refused(user: Any, era: str) -> None:
    execution = await call(user, "ask", {"form": "contact"}, None)
    assert execution.error is not None and "not made from a chat" in execution.error.message


class Waiting:
    """The chat's way of waiting (a question in Redis, polled until answered or too late),
    without a chat: nobody answers, unless a server says its page was done."""

    def __init__(self) -> None:
        self.redis = redis.asyncio.from_url(settings.REDIS_URL)
        self.asked: list[ElicitationRequest] = []

    async def __call__(self, request: ElicitationRequest) -> Answer:
        await elicitation.open_request(self.redis, request, chat_id=1, turn_id=1, user_id=1)
        # Listed once it stands in Redis: a test that sees it asked may look for it there.
        self.asked.append(request)
        try:
            return await elicitation.wait(self.redis, request, poll_s=0.05)
        finally:
            # As the chat's own asker does (chat/worker/asking.py): a cancelled call's scope
            # cancels every await in it again, so the withdrawal runs shielded.
            await asyncio.shield(elicitation.close(self.redis, request))


async def test_no_answer_in_time_fails_the_call_clearly(user: Any, era: str, settings: Any) -> None:
    # Longer than the tool's own timeout: the tool's clock is paused while the person thinks.
    settings.TESSERA = {**settings.TESSERA, "MCP_ELICITATION_TIMEOUT_S": 2.0}
    from toolsets.mcp.models import MCPServer

    await MCPServer.objects.filter(slug="ask").aupdate(timeout_s=1)
    from toolsets.mcp import catalog
    from toolsets.registry import all_toolsets

    catalog.invalidate()
    await asyncio.to_thread(all_toolsets)
    started = time.monotonic()
    execution = await call(user, "ask", {"form": "contact"}, Waiting())
    assert execution.error is not None
    assert execution.error.type == "timeout_error"
    assert execution.error.message.startswith("No answer within 2 s: Asking asked the user a question")
    assert time.monotonic() - started >= 2


@pytest.mark.parametrize("era", ["handshake"], indirect=True)
async def test_a_server_finishing_its_page_answers_the_card(user: Any, era: str) -> None:
    waiting = Waiting()
    execution = await call(user, "visit_and_finish", {"url": "https://shop.example/pay"}, waiting)
    assert execution.error is None, execution.error
    assert execution.result["content"][0]["text"] == "accept"
    assert waiting.asked[0].elicitation_id == "finish-1"


@pytest.fixture
def two_servers(settings: Any) -> Iterator[None]:
    """Two handshake-era servers a user has: A ("ask") and B ("other"); questions wait 4 s."""
    settings.TESSERA = {**settings.TESSERA, "MCP_ELICITATION_TIMEOUT_S": 4.0}
    for a in serve(SERVER, "http", "{port}", "legacy"):
        for b in serve(SERVER, "http", "{port}", "legacy"):
            for slug, port in (("ask", a), ("other", b)):
                server = register(
                    name=f"Server {slug}", slug=slug, transport="http", url=f"http://127.0.0.1:{port}/mcp"
                )
                assert server.protocol_version == "2025-11-25", server.refresh_message
            yield


async def _asked(person: Waiting) -> None:
    for _ in range(200):
        if person.asked:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the server asked nothing")


async def test_another_server_cannot_finish_a_servers_page(user: Any, two_servers: None) -> None:
    a_person = Waiting()
    a_call = asyncio.create_task(
        call(
            user,
            "visit_named",
            {"url": "https://a.example/pay", "elicitation_id": "pay-1", "finish_after": 0},
            a_person,
        )
    )
    await _asked(a_person)
    # B names A's question as finished: its notification concerns B's own pages only.
    assert said(await call(user, "finish_page", {"elicitation_id": "pay-1"}, Waiting(), slug="other")) == "sent"
    execution = await a_call
    assert execution.error is not None and execution.error.type == "timeout_error", execution.result


async def test_another_server_cannot_take_over_a_servers_page(user: Any, two_servers: None) -> None:
    a_person, b_person = Waiting(), Waiting()
    arguments = {"url": "https://a.example/pay", "elicitation_id": "pay-1"}
    a_call = asyncio.create_task(call(user, "visit_named", {**arguments, "finish_after": 2.0}, a_person))
    await _asked(a_person)
    # B asks a page under the same id while A's waits: A's server finishing its page still
    # answers A's card, not B's.
    b_call = asyncio.create_task(call(user, "visit_named", {**arguments, "finish_after": 0}, b_person, slug="other"))
    await _asked(b_person)
    assert said(await a_call) == "accept"
    b_execution = await b_call
    assert b_execution.error is not None and b_execution.error.type == "timeout_error"


# --- The protocol's own test server -----------------------------------------------------------------

needs_node = pytest.mark.skipif(not (EVERYTHING.exists() and shutil.which("node")), reason="npm ci first")


@pytest.fixture(params=["stdio", "http"])
def everything(request: pytest.FixtureRequest) -> Iterator[None]:
    if request.param == "stdio":
        register(name="Everything", slug="ev", transport="stdio", command="node", args=[str(EVERYTHING), "stdio"])
        yield
        return
    port = free_port()
    process = subprocess.Popen(
        ["node", str(EVERYTHING), "streamableHttp"], env={"PATH": "/usr/bin:/bin", "PORT": str(port)}
    )
    try:
        deadline = time.monotonic() + 20
        import socket

        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        register(name="Everything", slug="ev", transport="http", url=f"http://127.0.0.1:{port}/mcp")
        yield
    finally:
        process.terminate()
        process.wait(5)


@needs_node
async def test_the_everything_servers_form_is_drawn_and_answered(user: Any, everything: None) -> None:
    person = Person(
        (
            "accept",
            {
                "name": "Grace Hopper",
                "check": "on",
                "email": "grace@example.com",
                "integer": "7",
                "untitledMultipleSelectEnum": ["Piano", "Drums"],
                "titledMultipleSelectEnum": ["fish-2"],
                "legacyTitledEnum": "pet-2",
            },
        )
    )
    execution = await call(user, "trigger-elicitation-request", {}, person, slug="ev")
    assert execution.error is None, execution.error
    text = "\n".join(block.get("text", "") for block in execution.result["content"])
    assert "User provided the requested information" in text
    assert "- Name: Grace Hopper" in text and "- Favorite Integer: 7" in text
    raw = json.loads(text.split("Raw result: ", 1)[1])
    assert raw["content"]["untitledMultipleSelectEnum"] == ["Piano", "Drums"]
    assert raw["content"]["firstLine"] == "It was a dark and stormy night."  # its default, kept
    assert raw["content"]["number"] == 3.14 and raw["content"]["legacyTitledEnum"] == "pet-2"
    fields = {f["name"]: f for f in person.asked[0].fields}
    assert [o["label"] for o in fields["legacyTitledEnum"]["options"]][:2] == ["Cats", "Dogs"]
    assert fields["titledSingleSelectEnum"]["options"][0]["label"] == "Superman"


@needs_node
async def test_the_everything_servers_page_to_open(user: Any, everything: None) -> None:
    person = Person(("accept", None))
    execution = await call(
        user, "trigger-url-elicitation", {"url": "https://example.com/authorize?x=1"}, person, slug="ev"
    )
    assert execution.error is None, execution.error
    assert person.asked[0].mode == "url" and person.asked[0].domain == "example.com"


async def test_stop_while_asked_withdraws_the_question(user: Any, era: str) -> None:
    waiting = Waiting()
    running = asyncio.create_task(call(user, "ask", {"form": "contact"}, waiting))
    for _ in range(200):
        if waiting.asked:
            break
        await asyncio.sleep(0.05)
    (asked,) = waiting.asked
    key = f"{elicitation.PREFIX}:{asked.id}"
    assert await waiting.redis.exists(key)
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    # A handshake-era question waits on the connection's task, not the call's: it is withdrawn
    # with the call all the same, and nobody can answer it any more (the cancelled wait deletes it
    # as it unwinds: allow a loaded machine some seconds).
    for _ in range(200):
        if not await waiting.redis.exists(key):
            break
        await asyncio.sleep(0.05)
    assert not await waiting.redis.exists(key)


@needs_node
async def test_a_call_refused_until_a_page_is_visited_runs_after_done(user: Any, everything: None) -> None:
    # server-everything's error path: the call fails with URL_ELICITATION_REQUIRED (-32042)
    # naming a page; once the user is done there, the call is made again and runs (and asks
    # for its own page on the way).
    person = Person(("accept", None), ("accept", None))
    arguments = {"url": "https://example.com/authorize", "errorPath": True}
    execution = await call(user, "trigger-url-elicitation", arguments, person, slug="ev")
    assert execution.error is None, execution.error
    assert [asked.domain for asked in person.asked] == ["modelcontextprotocol.io", "example.com"]
    assert "User completed the URL elicitation flow" in execution.result["content"][0]["text"]


@needs_node
async def test_a_declined_page_that_is_required_fails_the_call(user: Any, everything: None) -> None:
    person = Person(("decline", None))
    arguments = {"url": "https://example.com/authorize", "errorPath": True}
    execution = await call(user, "trigger-url-elicitation", arguments, person, slug="ev")
    assert execution.error is not None and execution.error.type == "permission_denied"
    assert "needs the user to open a page first (https://modelcontextprotocol.io)" in execution.error.message
    assert "answered decline" in execution.error.message


@pytest.mark.parametrize("era", ["mrtr"], indirect=True)
async def test_questions_asked_at_once_are_shown_one_at_a_time(user: Any, era: str) -> None:
    waiting = 0
    most = 0

    class OneByOne(Person):
        async def __call__(self, request: ElicitationRequest) -> Answer:
            nonlocal waiting, most
            waiting += 1
            most = max(most, waiting)
            await asyncio.sleep(0.3)
            waiting -= 1
            return await super().__call__(request)

    person = OneByOne(("decline", None), ("cancel", None))
    execution = await call(user, "two", {}, person)
    assert most == 1
    assert sorted(asked.message for asked in person.asked) == ["First?", "Second?"]
    assert json.loads(said(execution)) in ({"a": "decline", "b": "cancel"}, {"a": "cancel", "b": "decline"})


@pytest.mark.parametrize(
    ("schema", "reason"),
    [
        ([], "not an object"),
        ({"type": "array"}, "must be of type object"),
        ({"properties": {}}, "no properties"),
        ({"properties": {"a b": {"type": "string"}}}, "not a plain name"),
        ({"properties": {"x": {"type": "string", "format": "ipv4"}}}, "format 'ipv4' is not supported"),
        ({"properties": {"x": {"type": "null"}}}, "type 'null' is not supported"),
        ({"properties": {"x": {"type": "string", "enum": [1, 2]}}}, "choices must be strings"),
        ({"properties": {"x": {"type": "string", "enum": []}}}, "no choices"),
        ({"properties": {"x": {"type": "array", "items": {"type": "string"}}}}, "only lists of choices"),
        ({"properties": {"x": {"type": "integer", "minimum": "0"}}}, "minimum must be a number"),
        ({"properties": {f"f{i}": {"type": "boolean"} for i in range(31)}}, "more than 30 fields"),
        ({"properties": {"x": {"type": "string", "enum": [str(i) for i in range(101)]}}}, "more than 100 choices"),
        ({"properties": {"x": {"type": "string"}}, "required": "x"}, "`required` must be a list"),
        # Compiling this takes seconds of uninterruptible work: refused before anything runs it.
        ({"properties": {"x": {"type": "string", "pattern": "((a{100}){100}){100}"}}}, "repeats too many times"),
        ({"properties": {"x": {"type": "string", "pattern": "a" * 1001}}}, "longer than 1000"),
        ({"properties": {"x": {"type": "string", "pattern": "(unclosed"}}}, "not a valid regular expression"),
    ],
)
def test_schemas_tessera_cannot_draw_are_refused_with_a_reason(schema: Any, reason: str) -> None:
    with pytest.raises(elicitation_form.SchemaRefused, match=reason):
        elicitation_form.form_fields(schema)


def test_untrusted_text_in_a_schema_is_cleaned_and_capped() -> None:
    (only,) = elicitation_form.form_fields(
        {"properties": {"x": {"type": "string", "title": "A\x00B\u202e" + "t" * 500, "description": "d\x07" * 900}}}
    )
    assert only["label"].startswith("AB") and len(only["label"]) == elicitation_form.MAX_TITLE
    assert "\x07" not in only["description"] and len(only["description"]) <= elicitation_form.MAX_DESCRIPTION
