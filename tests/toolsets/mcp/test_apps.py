"""MCP Apps on the client's side (toolsets.mcp.app_resources, catalog, app_sandbox): a tool's
`_meta.ui` kept, its page fetched, bounded, pinned with the definition, app-only tools never
offered to a model, and the View's Content-Security-Policy built from declared domains only.
Against the official example server from npm and a test server of our own (apps_server.py)."""

from __future__ import annotations

import base64
import time
from pathlib import Path
from typing import Any

import pytest
from django.test import RequestFactory, override_settings

from chat.worker.tools import ChatToolBox
from tests.stdio_servers import forked
from toolsets.mcp import app_resources, app_sandbox, catalog, stdio_guard
from toolsets.mcp.app_resources import Page, Refused
from toolsets.mcp.models import AppResource, MCPServer
from toolsets.registry import get_toolset

from .conftest import register

APPS_SERVER = Path(__file__).with_name("apps_server.py")
BASIC = Path(__file__).resolve().parents[3] / "node_modules" / ".bin" / "mcp-server-basic-vanillajs"


def apps_server(**fields: Any) -> MCPServer:
    return register(name="Apps", slug="apps", transport="stdio", **forked(APPS_SERVER), **fields)


@pytest.mark.django_db(transaction=True)
def test_the_official_example_server_s_tool_keeps_its_page() -> None:
    server = register(name="Basic", slug="basic", transport="stdio", command=str(BASIC), args=["--stdio"])
    (tool,) = server.tools
    assert tool["ui"]["resourceUri"] == "ui://get-time/mcp-app.html"
    page = AppResource.objects.get(server=server, sha256=tool["ui"]["sha256"])
    assert page.uri == "ui://get-time/mcp-app.html" and "<html" in page.html.lower()
    assert server.approved_tools["get-time"] == tool  # pinned with its page's hash
    app = get_toolset("mcp_basic").tools[0].app  # type: ignore[union-attr]
    assert app is not None and app["sha256"] == tool["ui"]["sha256"] and app["callable"]


@pytest.mark.django_db(transaction=True)
def test_app_only_tools_are_never_offered_to_the_model(user: Any) -> None:
    apps_server()
    toolset = get_toolset("mcp_apps")
    assert toolset is not None
    by_name = {t.app["name"]: t for t in toolset.tools if t.app}
    assert not by_name["app_secret"].model_visible and by_name["app_secret"].app["callable"]  # type: ignore[index]
    assert by_name["model_only"].model_visible and not by_name["model_only"].app["callable"]  # type: ignore[index]
    box = ChatToolBox(user_id=user.pk, turn_id=0, selection={"mcp_apps": [t.name for t in toolset.tools]})
    box.prepare()
    offered = {spec["function"]["name"] for spec in box.specs()}
    assert "toolset__mcp_apps__show" in offered and "toolset__mcp_apps__model_only" in offered
    assert not any("app_secret" in name for name in offered)


@pytest.mark.django_db(transaction=True)
def test_a_changed_page_holds_its_tools_like_a_changed_definition() -> None:
    server = apps_server()
    assert server.held_tools() == {}
    listed = [{**t, "_meta": {"ui": {"resourceUri": t["ui"]["resourceUri"]}}} for t in server.tools if "ui" in t]
    changed = Page("ui://hostile/view.html", "<!doctype html><p>changed</p>")
    catalog.store_tools(server.pk, listed, pages={"ui://hostile/view.html": changed})
    server.refresh_from_db()
    assert server.held_tools() == {"show": "changed", "app_secret": "changed", "model_only": "changed"}
    # The card still shows the page the admin approved, until they accept the change.
    show = next(t for t in get_toolset("mcp_apps").tools if t.app and t.app["name"] == "show")  # type: ignore[union-attr]
    assert show.app is not None and show.app["sha256"] == server.approved_tools["show"]["ui"]["sha256"]
    assert show.held
    # A page that failed to load this time keeps the hash stored before: nothing is held for it.
    catalog.approve(server)
    catalog.store_tools(server.pk, listed, pages={"ui://hostile/view.html": "reading it failed (timeout)"})
    server.refresh_from_db()
    assert server.held_tools() == {}


@pytest.mark.django_db(transaction=True)
def test_a_page_past_the_size_bound_is_refused_as_it_streams_and_its_card_says_why() -> None:
    # 50 MB: refused by its size as the bytes come (toolsets/mcp/stdio_guard.py), well before the
    # pages' time budget, and the tool keeps the reason for its cards.
    started = time.monotonic()
    with override_settings(TESSERA={**_tessera(), "MCP_APP_MAX_BYTES": 5_000_000}):
        server = register(
            name="Apps",
            slug="apps",
            transport="stdio",
            **forked(APPS_SERVER),
            env='{"APPS_HUGE": "1"}',
            timeout_s=30,
        )
    assert time.monotonic() - started < app_resources.PAGES_BUDGET_S
    huge = next(t for t in server.tools if t["name"] == "huge")
    assert "sha256" not in huge["ui"]
    assert huge["ui"]["refused"] == "it is larger than 5 MB, the most a page may be"
    assert "huge: its page ui://hostile/huge.html was not kept (it is larger than 5 MB" in server.refresh_message  # type: ignore[attr-defined]
    show = next(t for t in server.tools if t["name"] == "show")
    assert show["ui"]["sha256"]  # the other page was read all the same
    assert not AppResource.objects.filter(uri="ui://hostile/huge.html").exists()


def test_the_stdio_guard_passes_lines_within_the_bound_and_answers_the_others_at_once() -> None:
    out: list[bytes] = []
    lines = stdio_guard.Lines(100, out.append)
    lines.feed(b'{"jsonrpc":"2.0","id":1,"result":{}}\n{"jsonrpc":"2.0","id":2,"res')
    assert out == [b'{"jsonrpc":"2.0","id":1,"result":{}}\n']
    lines.feed(b"x" * 200)  # past the bound: answered now, from the id at its head
    assert b'"id":2,"error"' in out[1] and stdio_guard.REFUSED.encode() in out[1]
    lines.feed(b"x" * 10_000 + b'"}}\n{"id":"a"}\n')  # the rest is dropped; the next line passes
    assert out[2:] == [b'{"id":"a"}\n']
    # A server that writes the id last (the TypeScript SDK's) is answered when the line ends.
    lines.feed(b'{"result":{"contents":"' + b"y" * 500 + b'"},"jsonrpc":"2.0","id":7}\n')
    assert b'"id":7,"error"' in out[3] and len(out) == 4


def _tessera() -> dict[str, Any]:
    from django.conf import settings

    return dict(settings.TESSERA)


def test_a_page_is_read_from_text_or_base64_and_must_be_an_app() -> None:
    html = "<!doctype html><p>hi</p>"
    blob = base64.b64encode(html.encode()).decode()
    text = {"contents": [{"uri": "ui://a", "mimeType": "text/html;profile=mcp-app", "text": html}]}
    assert app_resources.page("ui://a", text).html == html
    coded = {"contents": [{"uri": "ui://a", "mimeType": "text/html; profile=mcp-app", "blob": blob}]}
    assert app_resources.page("ui://a", coded).html == html
    with pytest.raises(Refused, match="not text/html;profile=mcp-app"):
        app_resources.page("ui://a", {"contents": [{"uri": "ui://a", "mimeType": "text/html", "text": html}]})
    with pytest.raises(Refused, match="larger than"):
        app_resources.page("ui://a", text, limit=10)
    with pytest.raises(Refused, match="larger than"):
        app_resources.page("ui://a", coded, limit=10)


def test_only_plain_origins_of_the_declared_domains_are_kept() -> None:
    meta = app_resources.clean_meta(
        {
            "csp": {
                "connectDomains": ["https://api.example.com", "'unsafe-eval'", "*", "https:", "https://a.com/path"],
                "resourceDomains": ["https://*.cdn.example.com", "https://cdn.example.com; script-src *"],
                "frameDomains": "https://not-a-list.example.com",
            },
            "permissions": {"camera": {}, "usb": {}, "microphone": True},
            "prefersBorder": False,
            "domain": "evil.example.com",
        }
    )
    assert meta == {
        "csp": {"connectDomains": ["https://api.example.com"], "resourceDomains": ["https://*.cdn.example.com"]},
        "permissions": ["camera"],
        "prefersBorder": False,
        # Only a host label: Tessera puts it under its own sandbox host (app_sandbox.sandbox_origin).
        "domain": "evil",
    }


def test_the_view_s_policy_denies_by_default_and_adds_only_declared_domains() -> None:
    default = app_sandbox.policy({})
    assert default["default-src"] == ["'none'"]
    assert default["connect-src"] == ["'none'"] and default["frame-src"] == ["'none'"]
    assert default["base-uri"] == ["'self'"] and default["object-src"] == ["'none'"]
    assert default["form-action"] == ["'none'"]
    declared = app_sandbox.policy(
        {"csp": {"connectDomains": ["https://api.example.com"], "resourceDomains": ["https://cdn.example.com"]}}
    )
    assert declared["connect-src"] == ["https://api.example.com"]
    assert declared["script-src"] == ["'self'", "'unsafe-inline'", "https://cdn.example.com"]
    assert declared["img-src"] == ["'self'", "data:", "https://cdn.example.com"]
    assert declared["frame-src"] == ["'none'"]
    assert app_sandbox.allow_attribute({"permissions": ["camera", "clipboardWrite"]}) == "camera; clipboard-write"
    assert app_sandbox.allow_attribute({}) == ""


def test_each_server_s_views_have_an_origin_of_their_own_never_the_page_s() -> None:
    factory = RequestFactory()
    one, two = app_sandbox.label("one"), app_sandbox.label("two")
    assert one != two and one.startswith("app-")
    # `make run`: <label>.localhost on the same port (Chromium sends *.localhost to loopback).
    for host in ("127.0.0.1:8000", "localhost:8000"):
        assert app_sandbox.sandbox_origin(factory.get("/", HTTP_HOST=host), "one") == f"http://{one}.localhost:8000"
    assert app_sandbox.sandbox_origin(factory.get("/", HTTP_HOST="localhost:8000"), "one", "weather") == (
        "http://weather.localhost:8000"
    )
    with override_settings(ALLOWED_HOSTS=["chat.example.com"]):
        assert app_sandbox.sandbox_origin(factory.get("/", HTTP_HOST="chat.example.com"), "one") == ""
    # A deployment: a wildcard host gives each server its own; a single host is shared.
    with override_settings(MCP_APPS_SANDBOX_ORIGIN="https://*.apps.example.net"):
        assert app_sandbox.sandbox_origin(factory.get("/"), "two") == f"https://{two}.apps.example.net"
    with override_settings(MCP_APPS_SANDBOX_ORIGIN="https://apps.example.com"):
        assert app_sandbox.sandbox_origin(factory.get("/", HTTP_HOST="127.0.0.1"), "one") == "https://apps.example.com"


def test_a_page_s_domain_is_kept_as_one_host_label() -> None:
    assert app_resources.clean_meta({"domain": "Weather.apps.example.com"}) == {"domain": "weather"}
    assert app_resources.clean_meta({"domain": "https://maps.example.com/x"}) == {"domain": "maps"}
    for refused in ("app-1234", "-x", "a b", "", 7, "*.example.com"):
        assert "domain" not in app_resources.clean_meta({"domain": refused})


@pytest.mark.django_db
def test_the_proxy_page_carries_the_view_s_policy_and_talks_to_its_page_only(client: Any) -> None:
    factory = RequestFactory()
    page = factory.get("/", HTTP_HOST="127.0.0.1:8000")
    origin = app_sandbox.sandbox_origin(page, "one")
    host = origin.removeprefix("http://")
    url = app_sandbox.proxy_url(page, {"csp": {"connectDomains": ["https://api.example.com"]}}, origin)
    assert url.startswith(f"{origin}/app-sandbox/?p=")
    response = client.get(url.removeprefix(origin), HTTP_HOST=host)
    assert response.status_code == 200
    policy = response["Content-Security-Policy"]
    assert "connect-src https://api.example.com;" in policy
    assert "frame-ancestors http://127.0.0.1:8000" in policy and "default-src 'none'" in policy
    assert "X-Frame-Options" not in response
    assert b'const host = "http://127.0.0.1:8000";' in response.content
    # A policy the page did not sign is no policy; one signed for another server's origin neither.
    forged = client.get("/app-sandbox/?p=eyJtZXRhIjp7fX0:forged", HTTP_HOST=host)
    assert forged.status_code == 400
    other = app_sandbox.label("two") + ".localhost:8000"
    assert client.get(url.removeprefix(origin), HTTP_HOST=other).status_code == 400
    # The sandbox hosts serve nothing else; Tessera's own addresses serve no sandbox.
    assert client.get("/login/", HTTP_HOST=host).status_code == 404
    assert client.get(url.removeprefix(origin), HTTP_HOST="localhost:8000").status_code == 404
    login = client.get("/login/", HTTP_HOST="127.0.0.1:8000")
    assert "frame-src 'self' http://*.localhost:8000" in login["Content-Security-Policy"]


@pytest.mark.django_db
def test_a_sandbox_host_serves_the_sandbox_and_nothing_else(client: Any) -> None:
    with override_settings(
        MCP_APPS_SANDBOX_ORIGIN="https://*.apps.example.com", ALLOWED_HOSTS=[".apps.example.com", "testserver"]
    ):
        assert client.get("/login/", HTTP_HOST="weather.apps.example.com", secure=True).status_code == 404
        assert client.get("/app-sandbox/?p=x", HTTP_HOST="weather.apps.example.com", secure=True).status_code == 400
        # Tessera's own pages may frame it, and nothing else.
        login = client.get("/login/")
        assert "frame-src 'self' https://*.apps.example.com" in login["Content-Security-Policy"]


def test_the_admin_sets_whether_a_view_s_messages_are_confirmed(admin_client: Any, db: Any) -> None:
    server = MCPServer.objects.create(name="Apps", slug="apps", transport="stdio", command="true")
    assert server.apps_confirm_messages is False  # by default a View's message is sent at once, as the user's
    page = admin_client.get(f"/admin/mcp/mcpserver/{server.pk}/change/").content.decode()
    assert 'name="apps_confirm_messages"' in page and "Confirm the apps&#x27; messages" in page
    assert "sends or discards it" in page
