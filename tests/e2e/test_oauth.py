"""The MCP authorization flow end to end (hub/oauth.py): the official `mcp` SDK's client with
its `OAuthClientProvider` (discovery from the 401, dynamic registration or a client metadata
document, PKCE, token storage, refresh) against the real stack, while a real headless Chromium
signs in and answers Tessera's consent page; then the client lists and calls tools, refreshes,
and is disconnected from the account page."""

from __future__ import annotations

import asyncio
import base64
import datetime
import hashlib
import http.server
import queue
import secrets
import subprocess
import threading
import time
import traceback
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import httpx2
import mcp_types as types
import pytest
from django.conf import settings
from mcp.client import Client
from mcp.client.auth import OAuthClientProvider, TokenStorage
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken
from oauth2_provider.models import AccessToken, Application
from playwright.sync_api import Browser, Page

from chat.models import AppSettings
from core.processes import web_command
from tests.conftest import _free_port, _wait_for_http
from tests.documents_server import MetadataServer
from tests.e2e.axe import axe_violations, blocking
from tests.e2e.conftest import PASSWORD, browser_page, shot
from toolsets.models import ToolExecution

# A whole sign-in (browser, registration, consent, calls, refresh) on a busy machine, and the
# stack's start when this file runs first.
pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

ACCEPT = "application/json, text/event-stream"
BAD_REQUEST = ("Failed to load resource: the server responded with a status of 400",)


@pytest.fixture
def switched_on(e2e_user: Any) -> None:
    app = AppSettings.load()
    app.mcp_server = True
    app.save()


class MemoryStorage(TokenStorage):
    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


class Callback:
    """The native client's loopback listener (RFC 8252): where the browser lands after consent."""

    def __init__(self) -> None:
        self.answers: queue.Queue[dict[str, list[str]]] = queue.Queue()
        answers = self.answers

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if urlsplit(self.path).path == "/callback":  # not the browser's favicon.ico
                    answers.put(parse_qs(urlsplit(self.path).query))
                body = b"<!doctype html><title>Done</title><p>You can close this window."
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/callback"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()


class Session:
    """An MCP client in its own thread (Playwright's sync API owns this thread's event loop):
    `run(work)` connects, authorizing through the browser when the provider asks."""

    def __init__(self, base_url: str, *, client_metadata_url: str | None = None, scope: str | None = None) -> None:
        self.base_url = base_url
        self.storage = MemoryStorage()
        self.callback = Callback()
        self.authorize_urls: queue.Queue[str] = queue.Queue()
        self.provider = OAuthClientProvider(
            server_url=f"{base_url}/mcp",
            client_metadata=OAuthClientMetadata(
                client_name="Test Desktop",
                redirect_uris=[self.callback.url],  # type: ignore[list-item]
                grant_types=["authorization_code", "refresh_token"],
                response_types=["code"],
                token_endpoint_auth_method="none",
                scope=scope,
            ),
            storage=self.storage,
            redirect_handler=self._redirect,
            callback_handler=self._callback,
            client_metadata_url=client_metadata_url,
        )

    async def _redirect(self, url: str) -> None:
        self.authorize_urls.put(url)

    async def _callback(self) -> AuthorizationCodeResult:
        answer = await asyncio.to_thread(self.callback.answers.get, True, 90)
        if "code" not in answer:
            raise RuntimeError(f"authorization refused: {answer}")
        return AuthorizationCodeResult(
            code=answer["code"][0], state=answer["state"][0], iss=answer.get("iss", [None])[0]
        )

    def start(self, work: Callable[[Client], Awaitable[Any]]) -> Callable[[], Any]:
        """Runs `work` in a thread; the returned function waits for its result (or raises)."""
        box: dict[str, Any] = {}

        async def main() -> Any:
            async with httpx2.AsyncClient(auth=self.provider, timeout=60) as http:
                transport = streamable_http_client(f"{self.base_url}/mcp", http_client=http)
                client_info = types.Implementation(name="Claimed Other Name", version="1")
                async with Client(transport, mode="auto", client_info=client_info) as client:  # type: ignore[arg-type]
                    return await work(client)

        def target() -> None:
            try:
                box["result"] = asyncio.run(main())
            except BaseException as exc:  # handed to the test thread
                box["error"] = exc

        thread = threading.Thread(target=target, daemon=True)
        thread.start()

        def wait() -> Any:
            thread.join(120)
            assert not thread.is_alive(), "the MCP client did not finish"
            if "error" in box:
                raise box["error"]
            return box["result"]

        return wait


def _consent(page: Page, url: str, *, sign_in: bool = True, name: str = "oauth-consent") -> None:
    """Opens the authorization URL as the user's browser would, signs in, and waits for the
    consent page."""
    page.goto(url)
    if sign_in:
        page.fill("#id_username", "ada")
        page.fill("#id_password", PASSWORD)
        page.click("button[type=submit]")
    page.wait_for_selector("[data-testid=consent-form]")
    shot(page, name)


def _call(client: Client) -> Any:
    return client.call_tool("toolset__clock_math__calculate", {"expression": "12 * 34"})


@pytest.fixture
def signed_out(browser: Browser, stack: Any) -> Iterator[Page]:
    with browser_page(browser, stack.url, signed_in=False) as page:
        yield page


def test_a_client_registers_is_allowed_in_the_browser_calls_refreshes_and_is_disconnected(
    stack: Any, switched_on: None, signed_out: Page, e2e_user: Any
) -> None:
    page = signed_out
    session = Session(stack.url)

    async def first(client: Client) -> Any:
        listed = await client.list_tools()
        return listed, await _call(client)

    wait = session.start(first)
    _consent(page, session.authorize_urls.get(timeout=60))
    assert page.get_by_test_id("consent-client").inner_text() == "Test Desktop"
    assert urlsplit(session.callback.url).netloc in page.get_by_test_id("consent-redirect").inner_text()
    scopes = page.locator("[data-testid=consent-scopes] li")
    assert sorted(scopes.evaluate_all("items => items.map(i => i.dataset.scope)")) == [
        "mcp:agents",
        "mcp:approve",
        "mcp:tools",
    ]
    page.get_by_test_id("consent-allow").click()
    page.wait_for_url(f"{session.callback.url}*")
    listed, result = wait()

    names = {tool.name for tool in listed.tools}
    assert "toolset__clock_math__calculate" in names
    assert not result.is_error and "408" in result.content[0].text
    # Audited like an API token's call, under the name the user saw on the consent page.
    assert ToolExecution.objects.get(user=e2e_user, tool="calculate").client == "mcp: Test Desktop"
    first_tokens = session.storage.tokens
    assert first_tokens is not None and first_tokens.refresh_token

    # The access token runs out: the provider refreshes with its refresh token (rotated).
    just_now = datetime.datetime.now(datetime.UTC) - datetime.timedelta(seconds=5)
    AccessToken.objects.filter(user=e2e_user).update(expires=just_now)
    expired = httpx.post(
        f"{stack.url}/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        headers={
            "Authorization": f"Bearer {first_tokens.access_token}",
            "Accept": "application/json, text/event-stream",
        },
    )
    assert expired.status_code == 401 and 'error="invalid_token"' in expired.headers["www-authenticate"]
    session.provider.context.token_expiry_time = time.time() - 1
    result = session.start(_call)()
    assert not result.is_error
    second_tokens = session.storage.tokens
    assert second_tokens is not None
    assert second_tokens.refresh_token != first_tokens.refresh_token
    assert second_tokens.access_token != first_tokens.access_token

    # The user disconnects it on the account page: the next call is refused at once.
    page.goto(f"{stack.url}/account/")
    row = page.get_by_test_id("client-list").locator("li", has_text="Test Desktop")
    assert "tools, agents, may approve" in row.inner_text()
    shot(page, "oauth-connected-apps")
    row.get_by_test_id("client-disconnect").click()
    page.wait_for_selector("[data-testid=no-clients]")
    refused = httpx.post(
        f"{stack.url}/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        headers={
            "Authorization": f"Bearer {second_tokens.access_token}",
            "Accept": "application/json, text/event-stream",
        },
    )
    assert refused.status_code == 401
    challenge = refused.headers["www-authenticate"]
    assert f'resource_metadata="{stack.url}/.well-known/oauth-protected-resource/mcp"' in challenge
    # Nor can it get a new one with its refresh token.
    token_url = f"{stack.url}/oauth/token/"
    assert session.storage.client is not None
    again = httpx.post(
        token_url,
        data={
            "grant_type": "refresh_token",
            "refresh_token": second_tokens.refresh_token,
            "client_id": session.storage.client.client_id,
        },
    )
    assert again.status_code == 400 and again.json()["error"] == "invalid_grant"
    session.callback.close()


def test_deny_on_the_consent_page_gives_the_client_nothing(
    stack: Any, switched_on: None, signed_out: Page, e2e_user: Any
) -> None:
    session = Session(stack.url)

    async def work(client: Client) -> Any:
        return await client.list_tools()

    wait = session.start(work)
    _consent(signed_out, session.authorize_urls.get(timeout=60), name="oauth-consent-deny")
    signed_out.get_by_test_id("consent-deny").click()
    signed_out.wait_for_url(f"{session.callback.url}*")
    with pytest.raises(BaseException) as refused:
        wait()
    # The client's callback got the refusal (RFC 6749 §4.1.2.1), wrapped in the SDK's task group.
    assert "'error': ['access_denied']" in "".join(traceback.format_exception(refused.value))
    assert not AccessToken.objects.filter(user=e2e_user).exists()
    session.callback.close()


def test_a_consent_page_for_another_resource_or_redirect_is_an_error_page(
    stack: Any, switched_on: None, browser: Browser, e2e_user: Any
) -> None:
    callback = Callback()
    registered = httpx.post(
        f"{stack.url}/oauth/register/",
        json={"client_name": "Scripted", "redirect_uris": [callback.url], "token_endpoint_auth_method": "none"},
    ).json()
    base = {
        "response_type": "code",
        "client_id": registered["client_id"],
        "redirect_uri": callback.url,
        "code_challenge": "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
        "code_challenge_method": "S256",
        "state": "s",
    }
    with browser_page(browser, stack.url, allow_console=BAD_REQUEST) as page:
        query = httpx.QueryParams({**base, "resource": "https://elsewhere.example/mcp"})
        response = page.goto(f"{stack.url}/oauth/authorize/?{query}")
        assert response is not None and response.status == 400
        assert "only issues tokens for its own MCP endpoint" in page.get_by_test_id("consent-error").inner_text()
        shot(page, "oauth-consent-error")
        query = httpx.QueryParams({**base, "redirect_uri": "https://evil.example/"})
        response = page.goto(f"{stack.url}/oauth/authorize/?{query}")
        assert response is not None and response.status == 400 and page.url.startswith(stack.url)
        page.wait_for_selector("[data-testid=consent-error]")
    assert callback.answers.empty()
    callback.close()


def test_approval_prompt_auto_still_shows_the_consent_page_to_a_user_who_allowed_before(
    stack: Any, switched_on: None, browser: Browser, e2e_user: Any
) -> None:
    """A client the user allowed once holds a live token; a link naming the same client with
    someone else's PKCE challenge and `approval_prompt=auto` must still ask the user, and send
    nothing to the loopback port until they allow it."""
    callback = Callback()
    registered = httpx.post(
        f"{stack.url}/oauth/register/",
        json={"client_name": "Allowed Once", "redirect_uris": [callback.url], "token_endpoint_auth_method": "none"},
    ).json()
    base = {
        "response_type": "code",
        "client_id": registered["client_id"],
        "redirect_uri": callback.url,
        "code_challenge_method": "S256",
        "state": "s",
        "scope": "mcp:tools mcp:agents",
        "resource": f"{stack.url}/mcp",
    }
    with browser_page(browser, stack.url) as page:
        # The first time, the user allows it and the client gets a token.
        verifier = secrets.token_urlsafe(48)
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
        page.goto(f"{stack.url}/oauth/authorize/?{httpx.QueryParams({**base, 'code_challenge': challenge})}")
        page.get_by_test_id("consent-allow").click()
        page.wait_for_url(f"{callback.url}*")
        code = callback.answers.get(timeout=10)["code"][0]
        token = httpx.post(
            f"{stack.url}/oauth/token/",
            data={
                "grant_type": "authorization_code",
                "code": code,
                "redirect_uri": callback.url,
                "client_id": registered["client_id"],
                "code_verifier": verifier,
                "resource": f"{stack.url}/mcp",
            },
        )
        assert token.status_code == 200, token.text

        # Then a link with the attacker's challenge, asking to skip the page.
        attacker = {**base, "code_challenge": "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM", "approval_prompt": "auto"}
        page.goto(f"{stack.url}/oauth/authorize/?{httpx.QueryParams(attacker)}")
        page.wait_for_selector("[data-testid=consent-form]")
        assert page.url.startswith(stack.url)
        assert page.get_by_test_id("consent-client").inner_text() == "Allowed Once"
        shot(page, "oauth-consent-approval-prompt")
    assert callback.answers.empty()
    callback.close()


def test_the_consent_page_and_connected_apps_pass_axe(
    stack: Any, switched_on: None, browser: Browser, e2e_user: Any
) -> None:
    callback = Callback()
    registered = httpx.post(
        f"{stack.url}/oauth/register/",
        json={"client_name": "Axe Client", "redirect_uris": [callback.url], "token_endpoint_auth_method": "none"},
    ).json()
    params = httpx.QueryParams(
        {
            "response_type": "code",
            "client_id": registered["client_id"],
            "redirect_uri": callback.url,
            "code_challenge": "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
            "code_challenge_method": "S256",
            "state": "s",
            "scope": "mcp:tools mcp:agents mcp:approve",
            "resource": f"{stack.url}/mcp",
        }
    )
    with browser_page(browser, stack.url, bypass_csp=True) as page:
        for theme in ("light", "dark"):
            page.emulate_media(color_scheme=theme)
            page.goto(f"{stack.url}/oauth/authorize/?{params}")
            page.wait_for_selector("[data-testid=consent-form]")
            assert not blocking(axe_violations(page)), axe_violations(page)
            shot(page, f"oauth-consent-{theme}")
        page.get_by_test_id("consent-allow").click()
        page.wait_for_url(f"{callback.url}*")
        code = callback.answers.get(timeout=10)["code"][0]
        token = httpx.post(
            f"{stack.url}/oauth/token/",
            data={
                "grant_type": "authorization_code",
                "code": code,
                "redirect_uri": callback.url,
                "client_id": registered["client_id"],
                "code_verifier": "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk",
                "resource": f"{stack.url}/mcp",
            },
        )
        assert token.status_code == 200, token.text
        page.goto(f"{stack.url}/account/")
        page.wait_for_selector("[data-testid=client-list]")
        assert not blocking(axe_violations(page, "[data-testid=connected-clients]"))
    callback.close()


# --- A client identified by its metadata document (CIMD) --------------------------------------


@pytest.fixture
def cimd_stack(stack: Any, tmp_path: Path) -> Iterator[tuple[str, MetadataServer]]:
    """A second web process on the same database, allowed (by the explicit test-only settings) to
    fetch metadata documents from this machine, trusting the document server's certificate."""
    documents = MetadataServer(tmp_path)
    port = _free_port()
    env = {
        **stack.env,
        "TESSERA_OAUTH_CIMD_ALLOW_LOOPBACK": "true",
        "TESSERA_OAUTH_CIMD_CA_FILE": str(documents.cert),
    }
    log = open(Path(settings.VAR_DIR) / "logs" / "web-cimd.log", "wb")  # noqa: SIM115 - the child owns it
    web = subprocess.Popen(
        web_command(host="127.0.0.1", port=port),
        cwd=settings.BASE_DIR,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        _wait_for_http(f"http://127.0.0.1:{port}/login/", web)
        yield f"http://127.0.0.1:{port}", documents
    finally:
        web.terminate()
        web.wait(timeout=10)
        documents.close()


def test_a_client_identified_by_its_metadata_document_connects_without_registering(
    cimd_stack: tuple[str, MetadataServer], switched_on: None, browser: Browser, e2e_user: Any
) -> None:
    base, documents = cimd_stack
    session_path = f"/clients/{secrets.token_hex(4)}.json"
    client_id = documents.base + session_path
    session = Session(base, client_metadata_url=client_id)
    documents.documents[session_path] = {
        "client_id": client_id,
        "client_name": "Published Client",
        "redirect_uris": [session.callback.url],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
    }
    with browser_page(browser, base, signed_in=False) as page:
        wait = session.start(lambda client: _call(client))
        _consent(page, session.authorize_urls.get(timeout=60), name="oauth-consent-cimd")
        assert page.get_by_test_id("consent-client").inner_text() == "Published Client"
        assert page.get_by_test_id("consent-origin").inner_text() == urlsplit(documents.base).netloc
        page.get_by_test_id("consent-allow").click()
        page.wait_for_url(f"{session.callback.url}*")
        result = wait()
    assert not result.is_error and "408" in result.content[0].text
    assert documents.hits == [session_path]  # fetched once, then cached
    application = Application.objects.get(client_id=client_id)
    assert application.registration_source == Application.RegistrationSource.CIMD
    assert session.storage.client is not None and session.storage.client.client_id == client_id
    session.callback.close()


def test_a_metadata_document_with_a_foreign_redirect_is_refused(
    cimd_stack: tuple[str, MetadataServer], switched_on: None, browser: Browser, e2e_user: Any
) -> None:
    base, documents = cimd_stack
    path = "/clients/bad.json"
    client_id = documents.base + path
    documents.documents[path] = {
        "client_id": client_id,
        "client_name": "Sneaky",
        "redirect_uris": ["http://attacker.example/cb"],
        "token_endpoint_auth_method": "none",
    }
    params = httpx.QueryParams(
        {
            "response_type": "code",
            "client_id": client_id,
            "redirect_uri": "http://attacker.example/cb",
            "code_challenge": "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
            "code_challenge_method": "S256",
            "state": "s",
        }
    )
    with browser_page(browser, base, allow_console=BAD_REQUEST) as page:
        response = page.goto(f"{base}/oauth/authorize/?{params}")
        assert response is not None and response.status == 400
        page.wait_for_selector("[data-testid=consent-error]")
        assert urlsplit(page.url).netloc == urlsplit(base).netloc  # never sent to the attacker
    assert not Application.objects.filter(client_id=client_id).exists()
