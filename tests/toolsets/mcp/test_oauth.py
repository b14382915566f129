"""The MCP authorization flow end to end, against a local MCP server that is its own OAuth 2.1
authorization server (oauth_server.py, built with the SDK's server-side auth): the user's
Connect, the provider's consent page, the callback, encrypted tokens, calls with them, a refresh
when the access token expires, and Disconnect."""

from __future__ import annotations

import asyncio
import html
import re
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from asgiref.sync import async_to_sync
from django.test import Client
from django.urls import reverse

from toolsets import availability
from toolsets.executor import execute
from toolsets.mcp.models import MCPServer, OAuthGrant

from .conftest import register

pytestmark = pytest.mark.django_db(transaction=True)

TOOL = "toolset__mcp_oa__whoami"


@pytest.fixture
def oauth_server(transactional_db: Any, oauth_server_base: str) -> MCPServer:
    return register(
        name="OAuth server",
        slug="oa",
        transport="http",
        url=f"{oauth_server_base}/mcp",
        credential="oauth",
        timeout_s=10,
    )


def _connect(browser: Client) -> httpx.Response:
    """Connect, then follow the provider's consent redirect as the browser would; returns the
    provider's answer, which sends the browser back to Tessera's callback."""
    started = browser.post(reverse("toolsets:mcp_connect", args=["oa"]))
    assert started.status_code == 200, started.content[:500]
    # The page moves on to the provider by itself (see the view): its link is where it goes.
    link = re.search(rb'data-testid="mcp-connect-continue"', started.content)
    assert link is not None
    found = re.search(rb'<meta http-equiv="refresh" content="0;url=([^"]+)">', started.content)
    assert found is not None
    consent = httpx.get(html.unescape(found.group(1).decode()), follow_redirects=False)
    assert consent.status_code in (302, 303), consent.text[:500]
    return consent


def _callback(browser: Client, consent: httpx.Response) -> Any:
    back = urlsplit(consent.headers["location"])
    assert back.path == reverse("toolsets:mcp_callback")
    return browser.get(back.path, {k: v[0] for k, v in parse_qs(back.query).items()})


def _connected(server: MCPServer, user: Any) -> Any:
    """The user connected to `server` (consent given); the server's spec."""
    from toolsets.mcp.catalog import ServerSpec

    browser = Client()
    browser.force_login(user)
    _callback(browser, _connect(browser))
    return ServerSpec.of(server)


@asynccontextmanager
async def _held(spec: Any, user_id: int) -> AsyncIterator[Any]:
    """A connection of the test's own with the user's grant, closed after."""
    from toolsets.mcp.client import access_for
    from toolsets.mcp.connection import Connection

    connection = Connection(spec, access_for(spec, user_id, ""))
    try:
        yield connection
    finally:
        await connection.close()


def test_connect_consent_callback_then_calls_carry_and_refresh_the_token(oauth_server: MCPServer, user: Any) -> None:
    state = availability.for_user(user.pk)["mcp_oa"]
    assert not state.usable and state.reason == availability.NEEDS_SETUP

    browser = Client()
    browser.force_login(user)
    consent = _connect(browser)
    # PKCE and the client registered dynamically for this server.
    query = parse_qs(urlsplit(str(consent.request.url)).query)
    assert query["code_challenge_method"] == ["S256"] and query["client_id"]
    done = _callback(browser, consent)
    assert done.status_code == 302 and done["Location"].startswith(reverse("toolsets:settings"))

    assert OAuthGrant.objects.get(server=oauth_server, user=user).connected
    # The server listed nothing before anyone connected; the first connection discovered its tools.
    oauth_server.refresh_from_db()
    assert [t["name"] for t in oauth_server.tools] == ["whoami"]
    assert availability.for_user(user.pk)["mcp_oa"].usable

    first = async_to_sync(execute)(TOOL, {}, user_id=user.pk, tool_call_id="c1", pre_approved=True)
    assert first.ok, first.error
    number, subject = first.result["content"][0]["text"].split()
    assert subject == "alice@example"

    time.sleep(2.5)  # the access token lives 2 s; the stored refresh token gets a new one
    second = async_to_sync(execute)(TOOL, {}, user_id=user.pk, tool_call_id="c2", pre_approved=True)
    assert second.ok, second.error
    assert int(second.result["content"][0]["text"].split()[0]) > int(number)

    # Disconnect forgets the tokens: the toolset asks to connect again.
    browser.post(reverse("toolsets:mcp_disconnect", args=["oa"]))
    assert availability.for_user(user.pk)["mcp_oa"].reason == availability.NEEDS_SETUP


def test_a_listing_whose_grant_ended_asks_to_connect_again(oauth_server: MCPServer, user: Any) -> None:
    """Listing the tools with a user's grant is handled like a call: when the grant ends (the
    authorization server no longer knows it, or moved to another one), the user is told to
    connect again rather than that the connection closed."""
    from toolsets.base import ToolFailure

    spec = _connected(oauth_server, user)

    async def listing() -> tuple[list[str], ToolFailure]:
        async with _held(spec, user.pk) as connection:
            listed = [tool["name"] for tool in await connection.list_tools(10)]
            provider = connection._provider
            assert provider is not None and provider.context.current_tokens is not None
            # The authorization server forgets the grant: its refresh token is one it no longer
            # knows, and the access token has expired (they live 2 s).
            provider.context.current_tokens.refresh_token = "revoked"
            await asyncio.sleep(2.5)
            with pytest.raises(ToolFailure) as refused:
                await connection.list_tools(10)
            return listed, refused.value

    listed, refused = async_to_sync(listing)()
    assert listed == ["whoami"]
    assert refused.error_type == "permission_denied"
    assert "connect again" in str(refused), refused


def test_a_refused_access_token_is_refreshed_once_not_reported_as_a_lost_grant(
    oauth_server: MCPServer, user: Any
) -> None:
    """A server may refuse an access token before the time it gave (its clock, its rounding, or
    it dropped the token) while the grant lives on: one refresh heals that, the call goes
    through and the grant stays. A token the refresh cannot replace still ends the grant."""
    spec = _connected(oauth_server, user)

    async def refused_once() -> tuple[list[str], str]:
        async with _held(spec, user.pk) as connection:
            await connection.list_tools(10)
            provider = connection._provider
            assert provider is not None and provider.context.current_tokens is not None
            # The server no longer knows the access token, though we think it has long to live.
            provider.context.current_tokens.access_token = "dropped-by-the-server"
            provider.context.token_expiry_time = time.time() + 3600
            listed = [tool["name"] for tool in await connection.list_tools(10)]
            return listed, provider.context.current_tokens.access_token

    listed, token = async_to_sync(refused_once)()
    assert listed == ["whoami"]
    assert token.startswith("access-")
    grant = OAuthGrant.objects.get(server=oauth_server, user=user)
    assert grant.connected and token in grant.tokens
    assert availability.for_user(user.pk)["mcp_oa"].usable


def test_the_tokens_are_stored_encrypted(oauth_server: MCPServer, user: Any) -> None:
    from django.db import connection

    browser = Client()
    browser.force_login(user)
    _callback(browser, _connect(browser))
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT tokens, client_info FROM {OAuthGrant._meta.db_table}")
        tokens, _client_info = cursor.fetchone()
    assert tokens and "access-" not in tokens and "refresh-" not in tokens


def test_a_callback_from_another_session_or_replayed_is_refused(
    oauth_server: MCPServer, user: Any, other_user: Any
) -> None:
    browser = Client()
    browser.force_login(user)
    consent = _connect(browser)
    thief = Client()
    thief.force_login(other_user)
    refused = _callback(thief, consent)
    assert refused.status_code == 502 and b"not from this browser session" in refused.content
    assert not OAuthGrant.objects.filter(user=other_user).exclude(tokens="").exists()
    assert _callback(browser, consent).status_code == 302
    assert _callback(browser, consent).status_code == 502  # used already


def test_a_refused_consent_is_shown_and_nothing_is_stored(oauth_server: MCPServer, user: Any) -> None:
    browser = Client()
    browser.force_login(user)
    consent = _connect(browser)
    state = parse_qs(urlsplit(consent.headers["location"]).query)["state"][0]
    answer = browser.get(
        reverse("toolsets:mcp_callback"), {"state": state, "error": "access_denied", "error_description": "No <b>"}
    )
    assert answer.status_code == 502
    assert b"did not authorize Tessera: No &lt;b&gt;" in answer.content
    assert not availability.for_user(user.pk)["mcp_oa"].usable


def test_connect_needs_an_oauth_server_and_a_signed_in_user(oauth_server: MCPServer, user: Any) -> None:
    anonymous = Client().post(reverse("toolsets:mcp_connect", args=["oa"]))
    assert anonymous.status_code == 302 and "/login/" in anonymous["Location"]
    browser = Client()
    browser.force_login(user)
    assert browser.post(reverse("toolsets:mcp_connect", args=["nope"])).status_code == 404


def test_connect_is_a_csrf_checked_post(oauth_server: MCPServer, user: Any) -> None:
    """A link or an image on another site cannot start a flow in the user's name."""
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(user)
    url = reverse("toolsets:mcp_connect", args=["oa"])
    assert browser.get(url).status_code == 405
    assert browser.post(url).status_code == 403
    assert browser.get(reverse("toolsets:mcp_disconnect", args=["oa"])).status_code == 405
    assert browser.post(reverse("toolsets:mcp_disconnect", args=["oa"])).status_code == 403
    settings_page = browser.get(reverse("toolsets:settings"))
    token = re.search(rb'name="csrfmiddlewaretoken" value="([^"]+)"', settings_page.content)
    assert token is not None
    started = browser.post(url, {"csrfmiddlewaretoken": token.group(1).decode()})
    assert started.status_code == 200 and b"mcp-connect-continue" in started.content
    assert not OAuthGrant.objects.filter(user=user).exclude(tokens="").exists()


def test_a_workers_connection_checks_every_address_the_oauth_flow_follows(transactional_db: Any) -> None:
    """Refreshing a token happens in the worker, through the connection's HTTP client: a token
    endpoint on a private address (from the server's metadata) is refused before any request."""
    import asyncio
    import contextlib

    import httpx2
    from mcp.client.auth.exceptions import OAuthFlowError

    from toolsets.mcp import transport
    from toolsets.mcp.catalog import ServerSpec

    server = MCPServer.objects.create(
        name="OAuth server", slug="oa", url="https://mcp.example.com/mcp", credential="oauth"
    )

    async def follow(url: str) -> None:
        hooks = transport.event_hooks(ServerSpec.of(server), lambda response: None)
        async with httpx2.AsyncClient(event_hooks=hooks, timeout=2) as http:
            await http.post(url)

    for url in ("http://169.254.169.254/token", "http://10.0.0.7/token", "http://127.0.0.1:9/token"):
        with pytest.raises(OAuthFlowError):
            asyncio.run(follow(url))
    # The server's own host is where the admin put it: not refused (whether it answers from
    # here does not matter).
    with contextlib.suppress(httpx2.HTTPError):
        asyncio.run(follow("https://mcp.example.com/token"))


def test_the_callback_checks_the_issuer_before_showing_anything_from_the_response(
    oauth_server: MCPServer, user: Any
) -> None:
    browser = Client()
    browser.force_login(user)
    consent = _connect(browser)
    state = parse_qs(urlsplit(consent.headers["location"]).query)["state"][0]
    # A response that names another authorization server (a mix-up): refused, and the text it
    # carries is never shown.
    answer = browser.get(
        reverse("toolsets:mcp_callback"),
        {"state": state, "iss": "https://evil.example", "error": "x", "error_description": "Call +1 555 EVIL"},
    )
    assert answer.status_code == 502
    assert b"its issuer differs" in answer.content
    assert b"555 EVIL" not in answer.content and b"evil.example" not in answer.content
    assert not availability.for_user(user.pk)["mcp_oa"].usable


def test_a_pre_registered_client_is_used_instead_of_registering(oauth_server_base: str, user: Any) -> None:
    from toolsets.mcp import oauth
    from toolsets.mcp.catalog import ServerSpec

    # The local authorization server registers clients dynamically; a pre-registered client it
    # does not know is what the authorization URL must carry (no registration happened).
    server = MCPServer.objects.create(
        name="Pre",
        slug="pre",
        transport="http",
        url=f"{oauth_server_base}/mcp",
        credential="oauth",
        oauth_client_id="tessera-pre",
        oauth_client_secret="s3cret-value",
    )
    started = async_to_sync(oauth.start)(ServerSpec.of(server), user.pk, "http://testserver/toolsets/mcp/callback/")
    assert started is not None
    url, _ = started
    assert parse_qs(urlsplit(url).query)["client_id"] == ["tessera-pre"]
    assert not OAuthGrant.objects.filter(server=server).exclude(client_info="").exists()
    stored = MCPServer.objects.filter(pk=server.pk).values_list("oauth_client_secret", flat=True)[0]
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT oauth_client_secret FROM mcp_mcpserver WHERE id = %s", [server.pk])
        assert "s3cret-value" not in cursor.fetchone()[0]
    assert stored == "s3cret-value"


def test_the_secret_goes_the_way_the_authorization_server_accepts() -> None:
    from mcp.shared.auth import OAuthMetadata

    from toolsets.mcp import oauth_providers
    from toolsets.mcp.catalog import ServerSpec

    spec = ServerSpec(
        id=1, toolset_id="mcp_x", name="X", transport="http", oauth_client_id="c", oauth_client_secret="s"
    )
    metadata = oauth_providers.client_metadata(spec, "https://tessera.example/toolsets/mcp/callback/")

    def server(*methods: str) -> OAuthMetadata:
        return OAuthMetadata.model_validate(
            {
                "issuer": "https://as.example",
                "authorization_endpoint": "https://as.example/authorize",
                "token_endpoint": "https://as.example/token",
                "token_endpoint_auth_methods_supported": list(methods) or None,
            }
        )

    assert oauth_providers.pre_registered(spec, metadata, None).token_endpoint_auth_method == "client_secret_basic"
    assert oauth_providers.pre_registered(spec, metadata, server()).token_endpoint_auth_method == "client_secret_basic"
    chosen = oauth_providers.pre_registered(spec, metadata, server("client_secret_post")).token_endpoint_auth_method
    assert chosen == "client_secret_post"
    public = ServerSpec(id=1, toolset_id="mcp_x", name="X", transport="http", oauth_client_id="c")
    assert oauth_providers.pre_registered(public, metadata, server("none")).token_endpoint_auth_method == "none"


def test_tessera_serves_its_client_id_metadata_document(client: Client) -> None:
    answer = client.get("/client-metadata.json", secure=True)
    assert answer.status_code == 200
    document = answer.json()
    assert document["client_id"] == "https://testserver/client-metadata.json"
    assert document["redirect_uris"] == ["https://testserver/toolsets/mcp/callback/"]
    assert document["token_endpoint_auth_method"] == "none" and "authorization_code" in document["grant_types"]
    # Only an https Tessera offers it: the specification wants an https client ID.
    from toolsets.mcp import oauth

    assert oauth.client_metadata_url("https://tessera.example/toolsets/mcp/callback/") == (
        "https://tessera.example/client-metadata.json"
    )
    assert oauth.client_metadata_url("http://localhost:8000/toolsets/mcp/callback/") is None


class _Recorder:
    """An HTTP listener standing for an authorization server a hostile MCP server names: it
    records every request's headers and body (where a client secret would show)."""

    def __init__(self) -> None:
        import http.server
        import threading

        seen = self.seen = []  # type: list[str]

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0)).decode()
                seen.append(f"{self.headers}\n{body}")
                self.send_response(400)
                self.send_header("content-type", "application/json")
                self.end_headers()
                self.wfile.write(b'{"error": "invalid_grant"}')

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def recorder() -> Any:
    found = _Recorder()
    yield found
    found.close()


def _metadata(issuer: str, token_endpoint: str) -> str:
    from mcp.shared.auth import OAuthMetadata

    return OAuthMetadata.model_validate(
        {
            "issuer": issuer,
            "authorization_endpoint": f"{issuer}/authorize",
            "token_endpoint": token_endpoint,
            "response_types_supported": ["code"],
        }
    ).model_dump_json()


def _pre_registered(oauth_server_base: str, **fields: Any) -> MCPServer:
    return MCPServer.objects.create(
        name="Pre",
        slug="pre",
        transport="http",
        url=f"{oauth_server_base}/mcp",
        credential="oauth",
        oauth_client_id="tessera-pre",
        oauth_client_secret="s3cret-value",
        **fields,
    )


@pytest.mark.parametrize(("moved", "said"), [("issuer", "authorization server"), ("token endpoint", "token endpoint")])
def test_a_pre_registered_secret_is_never_sent_to_an_authorization_server_it_was_not_registered_with(
    oauth_server_base: str, user: Any, recorder: _Recorder, moved: str, said: str
) -> None:
    from toolsets.mcp import oauth
    from toolsets.mcp.catalog import ServerSpec
    from toolsets.mcp.secret_binding import SecretNotSent

    server = _pre_registered(
        oauth_server_base, oauth_issuer=f"{oauth_server_base}/", oauth_token_endpoint=f"{oauth_server_base}/token"
    )
    # The server's metadata now names another authorization server (or keeps the issuer and
    # moves the token endpoint): the flow must stop before the secret leaves.
    issuer = recorder.base if moved == "issuer" else f"{oauth_server_base}/"
    pending = {
        "server_id": server.pk,
        "state": "s",
        "verifier": "v" * 50,
        "redirect_uri": "http://testserver/toolsets/mcp/callback/",
        "oauth_metadata": _metadata(issuer, f"{recorder.base}/token"),
        "resource_metadata": "",
        "auth_server_url": issuer,
        "protocol_version": "2025-11-25",
        "scope": "",
    }
    with pytest.raises(SecretNotSent, match=f"{said} is now .*the secret was not sent"):
        async_to_sync(oauth.finish)(ServerSpec.of(server), user.pk, pending, "code", None)
    assert recorder.seen == []


def test_a_refresh_to_a_moved_token_endpoint_is_refused_and_said(
    oauth_server_base: str, user: Any, recorder: _Recorder
) -> None:
    from mcp.shared.auth import OAuthMetadata, OAuthToken

    from toolsets.mcp import oauth_providers
    from toolsets.mcp.catalog import ServerSpec
    from toolsets.mcp.secret_binding import SecretNotSent

    server = _pre_registered(
        oauth_server_base, oauth_issuer=f"{oauth_server_base}/", oauth_token_endpoint=f"{oauth_server_base}/token"
    )
    provider = oauth_providers.runtime_provider(ServerSpec.of(server), user.pk)
    assert isinstance(provider, oauth_providers.RuntimeProvider)
    async_to_sync(provider._initialize)()
    provider.context.current_tokens = OAuthToken(access_token="a", refresh_token="r")
    provider.context.oauth_metadata = OAuthMetadata.model_validate_json(
        _metadata(recorder.base, f"{recorder.base}/token")
    )
    with pytest.raises(SecretNotSent):
        async_to_sync(provider._refresh_token)()
    assert "the secret was not sent" in provider.take_failure()


def test_an_unbound_secret_is_bound_to_the_server_of_its_first_use(oauth_server_base: str) -> None:
    from toolsets.mcp.catalog import ServerSpec
    from toolsets.mcp.secret_binding import SecretNotSent, bind_secret

    server = _pre_registered(oauth_server_base)
    spec = ServerSpec.of(server)
    bind_secret(spec, f"{oauth_server_base}/", f"{oauth_server_base}/token")
    server.refresh_from_db()
    assert (server.oauth_issuer, server.oauth_token_endpoint) == (f"{oauth_server_base}/", f"{oauth_server_base}/token")
    bind_secret(spec, oauth_server_base, f"{oauth_server_base}/token")  # the same issuer, either spelling
    with pytest.raises(SecretNotSent):
        bind_secret(spec, "https://elsewhere.example/", "https://elsewhere.example/token")
