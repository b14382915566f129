"""Tessera's MCP client as the official conformance suite's client under test.

`conformance client --scenario NAME --command "python -m tests.conformance.mcp_client"` starts a
test server, runs this with the server's URL as the last argument and the scenario's name in
MCP_CONFORMANCE_SCENARIO (and, for some, data in MCP_CONFORMANCE_CONTEXT), then judges what
reached the server. Everything protocol-side here is Tessera's own code, the code the worker
runs: the server is an `MCPServer` row, its connection `toolsets.mcp.connection.Connection`
(discovery, listing, calls, healing), and OAuth is `toolsets.mcp.oauth` (Connect's `start`, the
callback's `finish`, the worker's provider). What this file plays is the people around it:

- the admin, who adds the server (OAuth when the scenario is an auth one; pre-registered client
  credentials when the scenario hands some over);
- the user, who presses Connect and consents: the suite's authorization server approves at
  once, so "consent" is following the authorization URL to the redirect and handing the
  callback's query to `finish`, as the browser would; and who, when a call asks for more
  access, connects again;
- the user again, when a server asks a question during a call (elicitation): the question is
  opened and waited on by `chat.worker.asking.Asking`, the worker's own code, in this run's
  Redis; the "card" is the real partial (`chat/_question.html`) rendered from what the
  worker pushes, read the way a browser builds the form's submission (its fields as drawn, with
  the server's defaults filled in), and Accept is a POST to the card's answer URL, which runs the
  answer view (`chat.question_views`) against a running turn of the user's own chat;
- the model, which calls every tool the server lists with arguments made from its schema (or the
  ones the scenario's context names for it), and reads a tool's error as its result.

Each run has a database of its own, copied from the migrated template the runner made
(TESSERA_CONFORMANCE_TEMPLATE), so scenarios never share state.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import shutil
import sys
import tempfile
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

ROOT = Path(__file__).resolve().parents[2]
# Where Tessera runs, as Connect builds its callback from the request: https, so Tessera offers
# its Client ID Metadata Document (https://<host>/client-metadata.json) to servers that support
# them; the host is the one the suite's CIMD scenario expects the document on.
CALLBACK = "https://conformance-test.local/toolsets/mcp/callback/"
# How often the "user" connects again when calls keep asking for more access.
MAX_CONNECTS = 3


def _django(workdir: Path) -> None:
    template = os.environ.get("TESSERA_CONFORMANCE_TEMPLATE")
    if not template:
        sys.exit("TESSERA_CONFORMANCE_TEMPLATE is not set: run the scenarios with python -m tests.conformance.run")
    shutil.copyfile(template, workdir / "tessera.sqlite3")
    os.environ["TESSERA_VAR_DIR"] = str(workdir)
    os.environ.pop("DATABASE_URL", None)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()


def example(schema: dict[str, Any]) -> Any:
    """A value the schema accepts (what a model would make up): its default or first example or
    enum member, else the simplest value of its type."""
    for key in ("default", "const"):
        if key in schema:
            return schema[key]
    if schema.get("examples"):
        return schema["examples"][0]
    if schema.get("enum"):
        return schema["enum"][0]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if kind == "object" or "properties" in schema:
        properties = schema.get("properties") or {}
        return {name: example(sub) for name, sub in properties.items() if name in (schema.get("required") or [])}
    if kind == "array":
        return []
    if kind in ("integer", "number"):
        return max(1, schema.get("minimum", 1))
    if kind == "boolean":
        return True
    return "example"


def _server_row(url: str, scenario: str, context: dict[str, Any]) -> tuple[Any, Any]:
    from django.contrib.auth import get_user_model

    from toolsets.mcp.models import MCPServer

    user = get_user_model().objects.create_user("conformance", password=None)
    server = MCPServer.objects.create(
        name="Conformance",
        slug="conformance",
        transport=MCPServer.Transport.HTTP,
        url=url,
        credential=MCPServer.Credential.OAUTH if scenario.startswith("auth/") else MCPServer.Credential.NONE,
        **_client_credentials(context),
    )
    return server, user


def _client_credentials(context: dict[str, Any]) -> dict[str, Any]:
    # The admin's pre-registered client, when the scenario's authorization server has one.
    if context.get("client_id"):
        return {"oauth_client_id": context["client_id"], "oauth_client_secret": context.get("client_secret") or ""}
    return {}


async def connect_user(spec: Any, user_id: int) -> None:
    """The user's Connect: `oauth.start` as the Connect view runs it, the browser's trip to the
    authorization server (which approves at once) and `oauth.finish` as the callback runs it."""
    import httpx2

    from toolsets.mcp import oauth

    started = await oauth.start(spec, user_id, CALLBACK)
    if started is None:
        return
    url, pending = started
    async with httpx2.AsyncClient(follow_redirects=False, timeout=30) as browser:
        response = await browser.get(url)
    location = response.headers.get("location", "")
    if response.status_code not in (301, 302, 303, 307) or not location:
        raise RuntimeError(f"the authorization server answered {response.status_code}, not a redirect")
    query = {key: values[0] for key, values in parse_qs(urlsplit(location).query).items()}
    if query.get("state") != pending.state:
        raise RuntimeError("the redirect carries another state")
    await oauth.finish(spec, user_id, pending.as_dict(), query.get("code", ""), query.get("iss"))


class FormReader(HTMLParser):
    """What a browser's `new FormData(form)` holds for the first elicitation form of a card: each
    named input's value (a checkbox's only when checked, "on" without a value), each select's
    selected option (else its first). The card's answer URL comes from its box."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.url = ""
        self.fields: list[tuple[str, str]] = []
        self._in_form = False
        self._select: str | None = None
        self._options: list[tuple[str, bool]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if "data-question-url" in a and not self.url:
            self.url = a["data-question-url"]
        if tag == "form" and "data-question-form" in a:
            self._in_form = True
        if not self._in_form or not a.get("name"):
            if tag == "option" and self._select is not None:
                self._options.append((a.get("value", ""), "selected" in a))
            return
        if tag == "input":
            kind = a.get("type", "text")
            if kind == "checkbox":
                if "checked" in a:
                    self.fields.append((a["name"], a.get("value") or "on"))
            elif kind not in ("submit", "button"):
                self.fields.append((a["name"], a.get("value", "")))
        elif tag == "select":
            self._select, self._options = a["name"], []

    def handle_endtag(self, tag: str) -> None:
        if tag == "select" and self._select is not None:
            chosen = [value for value, selected in self._options if selected] or [v for v, _ in self._options[:1]]
            self.fields += [(self._select, value) for value in chosen]
            self._select = None
        elif tag == "form":
            self._in_form = False


class UserAtTheCard:
    """The turn's sink as far as a question goes (what `chat.worker.asking.Asking` uses): the
    chat and running turn the question belongs to, Redis, and the card being drawn, which is
    where the person reads it and presses Accept with the form as shown."""

    def __init__(self, user: Any, redis: Any) -> None:
        from chat.models import Chat, Turn

        self.user, self.redis = user, redis
        chat = Chat.objects.create(owner=user, title="Conformance")
        self.turn = Turn.objects.create(chat=chat, status=Turn.Status.RUNNING)
        self.chat_id, self.turn_id = chat.pk, self.turn.pk
        self.automated = False  # an ordinary chat, not an automation's run
        self.answers: list[asyncio.Task[None]] = []

    async def question_needed(self, step: int, position: int, question: dict[str, Any], lane: str = "") -> None:
        from django.template.loader import render_to_string

        card = render_to_string("chat/_question.html", {"card": {"question": question}})
        print(f"card shown: {question['mode']} question from {question['server']}: {question['message'][:80]}")
        self.answers.append(asyncio.create_task(self._accept(card)))

    async def question_answered(self, step: int, position: int, lane: str = "") -> None:
        print("card answered")

    async def _accept(self, card: str) -> None:
        from asgiref.sync import sync_to_async
        from django.conf import settings
        from django.test import Client
        from django.urls import reverse

        form = FormReader()
        form.feed(card)

        def post() -> Any:
            # CSRF-checked like the page's script: the token from the cookie a page set.
            browser = Client(enforce_csrf_checks=True, HTTP_HOST="localhost")
            browser.force_login(self.user)
            browser.get(reverse("toolsets:settings"))
            token = browser.cookies[settings.CSRF_COOKIE_NAME].value
            # Repeated keys (multiple choice) stay lists: the view reads them with getlist.
            return browser.post(form.url, {**_post_data(form.fields), "action": "accept"}, HTTP_X_CSRFTOKEN=token)

        response = await sync_to_async(post)()
        print(f"accept: {response.status_code} {response.content.decode()[:300]}")
        if response.status_code != 200:
            raise RuntimeError(f"the card refused the answer: {response.status_code} {response.content[:300]!r}")


def _post_data(fields: list[tuple[str, str]]) -> dict[str, list[str]]:
    data: dict[str, list[str]] = {}
    for key, value in fields:
        data.setdefault(key, []).append(value)
    return data


async def run(url: str, scenario: str, context: dict[str, Any]) -> None:
    from asgiref.sync import sync_to_async

    from chat.worker.asking import Asking
    from core.redis_client import async_client
    from toolsets.base import ToolFailure
    from toolsets.mcp import elicitation
    from toolsets.mcp.catalog import ServerSpec
    from toolsets.mcp.client import access_for, elicitation_timeout_s
    from toolsets.mcp.connection import Connection

    server, user = await sync_to_async(_server_row)(url, scenario, context)
    spec = ServerSpec.of(server)
    card = await sync_to_async(UserAtTheCard)(user, async_client(4))
    ask = Asking(card).elicit  # type: ignore[arg-type] # the part of a TurnSink a question uses
    connects = 0
    if spec.credential == "oauth":
        await connect_user(spec, user.pk)
        connects += 1
    chosen = chosen_arguments(context)
    while True:
        connection = Connection(spec, access_for(spec, user.pk, ""))
        try:
            tools = await connection.list_tools(spec.timeout_s)
            for position, tool in enumerate(tools):
                arguments = chosen.get(tool["name"]) or example(tool.get("inputSchema") or {})
                # As `toolsets.mcp.client.call_tool` makes a chat's call: the server's questions
                # during it go to the card of this call.
                questions = elicitation.Handler(
                    spec.name, tool["name"], functools.partial(ask, 0, position), None, elicitation_timeout_s()
                )
                with elicitation.calling(connection, questions):
                    try:
                        result = await connection.call(
                            tool["name"], arguments, None, spec.timeout_s, waits=questions.wait_budget
                        )
                    except ToolFailure as exc:
                        if not answered_by_server(exc):
                            raise
                        # The server answered the call with an error (a tool it lists but does
                        # not run, say): the executor gives that to the model as the tool's
                        # result, and the turn goes on.
                        print(f"{tool['name']}: the model is told: {exc}")
                        continue
                print(f"{tool['name']}: {json.dumps(result)[:300]}")
            await asyncio.gather(*card.answers)  # an answer the card refused fails the run
            return
        except ToolFailure as exc:
            # When Tessera asks the user to connect again (a grant that expired, a call that needs
            # more scope), the user does, a few times at most.
            if "connect again" not in str(exc) or connects >= MAX_CONNECTS:
                raise
            print(f"connecting again: {exc}")
            await connect_user(spec, user.pk)
            connects += 1
        finally:
            await connection.close()


def chosen_arguments(context: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The arguments a scenario wants its tools called with (`toolCalls` in its context: values
    a model would not make up from the schema, such as text that needs encoding in a header), by
    tool name."""
    chosen: dict[str, dict[str, Any]] = {}
    for call in context.get("toolCalls") or []:
        if isinstance(call, dict) and isinstance(call.get("name"), str) and isinstance(call.get("arguments"), dict):
            chosen[call["name"]] = call["arguments"]
    return chosen


def answered_by_server(exc: Any) -> bool:
    """Whether a call's failure is the server's answer (an error result or a JSON-RPC error):
    what the model reads. A connection that failed, a timeout or a refused credential is the
    client's to overcome, and fails the run."""
    return exc.error_type == "execution_error" and not exc.retryable


def main() -> None:
    url = sys.argv[-1]
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    with tempfile.TemporaryDirectory(prefix="tessera-conformance-") as workdir:
        _django(Path(workdir))
        asyncio.run(run(url, scenario, context))


if __name__ == "__main__":
    main()
