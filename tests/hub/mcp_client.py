"""Shared pieces of the `/mcp` tests: the official `mcp` client against the real stack, a client
declaring only some elicitation modes, an OAuth access token as the consent page would issue it,
and the signed-in owner answering on Tessera's approval page."""

from __future__ import annotations

import asyncio
import re
import secrets
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

import httpx
import httpx2
import mcp_types as types
import pytest
from django.utils import timezone
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client

MODES = ["auto", "legacy"]


def run(
    url: str,
    token: str,
    mode: str,
    work: Callable[[Client], Awaitable[Any]],
    name: str = "Test Desktop",
    **options: Any,
) -> Any:
    """One client session (`mode`: the SDK's era choice) doing `work`, with `token` as Bearer."""

    async def main() -> Any:
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as http:
            transport = streamable_http_client(f"{url}/mcp", http_client=http)
            async with Client(
                transport, mode=mode, client_info=types.Implementation(name=name, version="1"), **options
            ) as client:  # type: ignore[arg-type]
                return await work(client)

    return asyncio.run(main())


def declare_elicitation(monkeypatch: pytest.MonkeyPatch, *, form: bool, url: bool) -> None:
    """Clients that declare only some elicitation modes (the official client declares both)."""
    from mcp.client.session import ClientSession

    build = ClientSession._build_capabilities

    def declared(self: Any, version: str) -> types.ClientCapabilities:
        found = build(self, version)
        if found.elicitation is not None:
            found.elicitation = types.ElicitationCapability(
                form=types.FormElicitationCapability() if form else None,
                url=types.UrlElicitationCapability() if url else None,
            )
        return found

    monkeypatch.setattr(ClientSession, "_build_capabilities", declared)


def oauth_token(user: Any, base_url: str, *, name: str, scope: str, application: Any = None) -> tuple[str, Any]:
    """An access token for `/mcp` as the consent page issues it (hub/oauth.py), and its client."""
    from oauth2_provider.models import AccessToken, Application

    if application is None:
        application = Application.objects.create(
            name=name,
            client_type=Application.CLIENT_PUBLIC,
            authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
            redirect_uris="http://127.0.0.1:8765/callback",
        )
    token = secrets.token_urlsafe(30)
    AccessToken.objects.create(
        user=user,
        application=application,
        token=token,
        expires=timezone.now() + timedelta(hours=1),
        scope=scope,
        resource=[f"{base_url}/mcp"],
    )
    return token, application


def signed_in(user: Any) -> dict[str, str]:
    from django.test import Client as DjangoClient

    browser = DjangoClient()
    browser.force_login(user)
    return {"sessionid": browser.cookies["sessionid"].value}


async def answer_on_the_page(base_url: str, cookies: dict[str, str], url: str, decision: str) -> httpx.Response:
    """What the owner does in the browser: open the page, press a button (a CSRF-checked POST)."""
    async with httpx.AsyncClient(cookies=cookies, timeout=30) as browser:
        page = await browser.get(url)
        assert page.status_code == 200, page.text
        assert "Calculate" in page.text
        csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
        assert csrf is not None
        return await browser.post(
            url,
            data={"csrfmiddlewaretoken": csrf.group(1), "decision": decision},
            headers={"Referer": url, "Origin": base_url},
        )


def text(result: Any) -> str:
    return str(result.content[0].text)
