"""Who a handshake-era session at `/mcp` belongs to, and how many one caller may hold
(hub/mcp_sessions.py): OAuth clients are told apart by client id, never by name; sessions
are capped per token and per user, the oldest idle one closing first. Through the official `mcp`
client against the real stack (and a second web process of it with small caps)."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
from collections.abc import Iterator
from typing import Any

import httpx
import httpx2
import mcp_types as types
import pytest
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client

from core.processes import web_command
from hub.models import ApiToken
from tests.conftest import _free_port, _wait_for_http
from toolsets.models import PolicySettings, ToolExecution, ToolRule

from .mcp_client import oauth_token, run

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

HANDSHAKE = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "Claude", "version": "1"}},
}


def _open_session(url: str, token: str) -> str:
    opened = httpx.post(f"{url}/mcp", json=INITIALIZE, headers={**HANDSHAKE, "Authorization": f"Bearer {token}"})
    assert opened.status_code == 200, opened.text
    return opened.headers["mcp-session-id"]


def _in_session(url: str, token: str, session_id: str) -> httpx.Response:
    headers = {**HANDSHAKE, "Authorization": f"Bearer {token}", "Mcp-Session-Id": session_id}
    headers["Mcp-Protocol-Version"] = "2025-11-25"
    body = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}
    return httpx.post(f"{url}/mcp", json=body, headers=headers, timeout=30)


def test_two_oauth_clients_with_the_same_name_share_nothing(stack: Any, switched_on: None, user: Any) -> None:
    first, _ = oauth_token(user, stack.url, name="Claude", scope="mcp:tools")
    second, _ = oauth_token(user, stack.url, name="Claude", scope="mcp:tools")
    # A session of one is no session of the other's.
    session_id = _open_session(stack.url, first)
    httpx.post(
        f"{stack.url}/mcp",
        json={"jsonrpc": "2.0", "method": "notifications/initialized"},
        headers={**HANDSHAKE, "Authorization": f"Bearer {first}", "Mcp-Session-Id": session_id},
    )
    assert _in_session(stack.url, first, session_id).status_code == 200
    assert _in_session(stack.url, second, session_id).status_code == 404
    # Nor is the sealed state of one's round trip the other's.
    ToolRule.objects.create(toolset_id="clock_math", tool="calculate", policy="ask")
    arguments = {"expression": "1 + 1"}

    async def started(client: Client) -> Any:
        return await client.session.call_tool("toolset__clock_math__calculate", arguments, allow_input_required=True)

    async def never(context: Any, params: Any) -> types.ElicitResult:
        raise AssertionError("driven by hand")

    asked = run(stack.url, first, "auto", started, elicitation_callback=never)
    assert isinstance(asked, types.InputRequiredResult)
    answer: dict[str, Any] = {"tessera_approval": types.ElicitResult(action="accept")}

    async def moved(client: Client) -> Any:
        with pytest.raises(Exception, match="requestState"):
            await client.session.call_tool(
                "toolset__clock_math__calculate",
                arguments,
                input_responses=answer,
                request_state=asked.request_state,
                allow_input_required=True,
            )

    run(stack.url, second, "auto", moved, elicitation_callback=never)
    # Another token of the same client is the same caller: its sessions and state carry over.
    from oauth2_provider.models import AccessToken

    application = AccessToken.objects.get(token_checksum=_checksum(first)).application
    refreshed, _ = oauth_token(user, stack.url, name="Claude", scope="mcp:tools", application=application)
    assert _in_session(stack.url, refreshed, session_id).status_code == 200


def _checksum(token: str) -> str:
    import hashlib

    return hashlib.sha256(token.encode()).hexdigest()


# ---- Caps: a web process of the stack with small ones ---------------------------------------


@pytest.fixture
def capped(stack: Any) -> Iterator[str]:
    """A second web process of the stack (same database, Redis and worker): 2 sessions per token,
    3 per user."""
    port = _free_port()
    env = {**stack.env, "TESSERA_MCP_SESSIONS_PER_TOKEN": "2", "TESSERA_MCP_SESSIONS_PER_USER": "3"}
    web = subprocess.Popen(
        web_command(host="127.0.0.1", port=port),
        env=env,
        stdout=open(stack.logs / "capped-web.log", "wb"),  # noqa: SIM115 - the child process owns it
        stderr=subprocess.STDOUT,
    )
    try:
        _wait_for_http(f"http://127.0.0.1:{port}/login/", web)
        yield f"http://127.0.0.1:{port}"
    finally:
        web.terminate()
        try:
            web.wait(timeout=10)
        except subprocess.TimeoutExpired:
            web.kill()


async def _client(stack: contextlib.AsyncExitStack, url: str, token: str, **options: Any) -> Client:
    """An official client in a session of its own (the handshake era), open until `stack` closes."""
    http = await stack.enter_async_context(httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60))
    transport = streamable_http_client(f"{url}/mcp", http_client=http)
    info = types.Implementation(name="Test Desktop", version="1")
    client = Client(transport, mode="legacy", client_info=info, **options)  # type: ignore[arg-type]
    return await stack.enter_async_context(client)


async def _alive(client: Client) -> bool:
    try:
        await asyncio.wait_for(client.list_tools(), 20)
    except Exception:
        return False
    return True


def test_one_more_session_than_a_token_may_hold_closes_its_oldest_idle_one(
    capped: str, switched_on: None, user: Any
) -> None:
    token = ApiToken.issue(user, "desktop")[1]
    other = ApiToken.issue(user, "laptop")[1]

    async def main() -> list[bool]:
        async with contextlib.AsyncExitStack() as held:
            first = await _client(held, capped, token)
            second = await _client(held, capped, token)
            assert await _alive(first)  # used since: the second is now the one idle longest
            third = await _client(held, capped, token)  # one more than 2 for this token
            by_token = [await _alive(first), await _alive(second), await _alive(third)]
            # The user's cap (3) counts every token of theirs: a fourth session closes the user's
            # oldest idle one, whichever token holds it (here: the first, idle longest).
            assert await _alive(third)
            laptop = await _client(held, capped, other)
            assert await _alive(first) and await _alive(third) and await _alive(laptop)
            await _alive(third)
            await _alive(laptop)
            desk = await _client(held, capped, other)
            by_user = [await _alive(first), await _alive(third), await _alive(laptop), await _alive(desk)]
            return by_token + by_user

    assert asyncio.run(main()) == [True, False, True, False, True, True, True]


def test_when_every_session_is_busy_a_new_one_is_refused_not_cut_short(
    capped: str, switched_on: None, user: Any
) -> None:
    ToolRule.objects.create(toolset_id="clock_math", tool="calculate", policy="ask")
    PolicySettings(approval_timeout_s=6).save()
    token = ApiToken.issue(user, "desktop")[1]
    links: list[str] = []

    async def opened(context: Any, params: Any) -> types.ElicitResult:
        links.append(params.url)  # the call then waits for the owner, who never answers here
        return types.ElicitResult(action="accept")

    async def main() -> tuple[Any, httpx.Response, list[Any]]:
        async with contextlib.AsyncExitStack() as held:
            busy = [await _client(held, capped, token, elicitation_callback=opened) for _ in range(2)]
            calls = [
                asyncio.ensure_future(client.call_tool("toolset__clock_math__calculate", {"expression": "1 + 1"}))
                for client in busy
            ]
            while len(links) < 2:
                await asyncio.sleep(0.1)
            try:
                await _client(held, capped, token)
                refused: Any = None
            except Exception as exc:
                refused = exc
            # What any client sees, not only the official one: a JSON-RPC error with a 4xx.
            async with httpx.AsyncClient(timeout=30) as plain:
                answer = await plain.post(
                    f"{capped}/mcp", json=INITIALIZE, headers={**HANDSHAKE, "Authorization": f"Bearer {token}"}
                )
            return refused, answer, await asyncio.gather(*calls)

    refused, answer, results = asyncio.run(main())
    assert refused is not None and "Too many open MCP sessions for this token" in repr(refused)
    assert answer.status_code == 429
    assert answer.json()["error"]["message"].startswith("Too many open MCP sessions for this token (2)")
    # The calls that held the sessions were not cut short: they ended at the approval timeout.
    assert all(result.is_error and "Nobody approved this call" in result.content[0].text for result in results)
    assert ToolExecution.objects.filter(user=user, tool="calculate", approval="timed_out").count() == 2
