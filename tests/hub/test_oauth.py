"""The authorization server of /mcp (hub/oauth.py): metadata, registration, the consent page,
PKCE, redirect URIs, resource indicators, codes, refresh rotation and revocation, through Django's
test client against django-oauth-toolkit itself (the end-to-end flow with the `mcp` SDK's client
and a browser is in tests/e2e/test_oauth.py)."""

from __future__ import annotations

import base64
import hashlib
import secrets
from datetime import timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from django.test import Client
from django.utils import timezone
from oauth2_provider.models import AccessToken, Application, RefreshToken

from chat.models import AppSettings
from hub import oauth
from hub.caller import oauth_caller

pytestmark = pytest.mark.django_db

MCP = "http://testserver/mcp"
REDIRECT = "http://127.0.0.1:8765/callback"


def _pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    return verifier, challenge


def _register(client: Client, **extra: Any) -> dict[str, Any]:
    body = {
        "client_name": "Test Desktop",
        "redirect_uris": [REDIRECT],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
        **extra,
    }
    response = client.post("/oauth/register/", body, content_type="application/json")
    assert response.status_code == 201, response.content
    data: dict[str, Any] = response.json()
    return data


def _authorize_params(client_id: str, challenge: str, **extra: str) -> dict[str, str]:
    return {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": REDIRECT,
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "state": "st4te",
        "scope": "mcp:tools mcp:agents",
        "resource": MCP,
        **extra,
    }


def _consent(browser: Client, params: dict[str, str], allow: bool = True) -> Any:
    page = browser.get("/oauth/authorize/", params)
    assert page.status_code == 200, page.content
    form = {
        name: value
        for name, value in page.context["form"].initial.items()
        if value is not None and name not in ("allow",)
    }
    if allow:
        form["allow"] = "Authorize"
    return browser.post("/oauth/authorize/", form)


def _code(browser: Client, client_id: str, challenge: str, **extra: str) -> str:
    response = _consent(browser, _authorize_params(client_id, challenge, **extra))
    assert response.status_code == 302, response.content
    query = parse_qs(urlsplit(response["Location"]).query)
    assert query["state"] == ["st4te"]
    return query["code"][0]


def _token(client: Client, **body: str) -> Any:
    return client.post("/oauth/token/", body)


@pytest.fixture(autouse=True)
def switched_on(db: Any) -> None:
    app = AppSettings.load()
    app.mcp_server = True
    app.save()


def test_while_the_mcp_server_is_off_there_is_nothing_to_authorize(client: Client, switched_on: None) -> None:
    app = AppSettings.load()
    app.mcp_server = False
    app.save()
    for path in ("/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-authorization-server"):
        assert client.get(path).status_code == 404
    assert client.get("/oauth/authorize/").status_code == 404
    assert client.post("/oauth/register/", {}, content_type="application/json").status_code == 404
    assert client.post("/oauth/token/", {}).status_code == 404
    assert client.post("/oauth/revoke/", {"token": "x"}).status_code != 404  # revoking always works


@pytest.fixture
def browser(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def registered(client: Client) -> dict[str, Any]:
    return _register(client)


def test_metadata_documents_describe_mcp_and_this_authorization_server(client: Client) -> None:
    for path in ("/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"):
        resource = client.get(path).json()
        assert resource["resource"] == MCP
        assert resource["authorization_servers"] == ["http://testserver"]
        assert set(resource["scopes_supported"]) == {"mcp:tools", "mcp:agents", "mcp:approve"}
    assert client.get("/.well-known/oauth-protected-resource/elsewhere").status_code == 404

    server = client.get("/.well-known/oauth-authorization-server").json()
    assert server["issuer"] == "http://testserver"
    assert server["authorization_endpoint"] == "http://testserver/oauth/authorize/"
    assert server["token_endpoint"] == "http://testserver/oauth/token/"
    assert server["registration_endpoint"] == "http://testserver/oauth/register/"
    assert server["revocation_endpoint"] == "http://testserver/oauth/revoke/"
    assert server["code_challenge_methods_supported"] == ["S256"]
    assert server["response_types_supported"] == ["code"]
    assert "none" in server["token_endpoint_auth_methods_supported"]
    assert server["client_id_metadata_document_supported"] is True
    # Not an OpenID provider: no half-true OpenID configuration either (clients fall back to RFC 8414).
    assert client.get("/.well-known/openid-configuration").status_code == 404


def test_behind_a_trusted_proxy_the_published_urls_are_the_ones_clients_reach(client: Client, settings: Any) -> None:
    forwarded = {"X-Forwarded-Proto": "https", "Host": "localhost"}
    # From an address that is not a trusted proxy, the header is not believed.
    assert (
        client.get("/.well-known/oauth-protected-resource/mcp", headers=forwarded)
        .json()["resource"]
        .startswith("http:")
    )
    settings.TRUSTED_PROXIES = ["127.0.0.1"]
    resource = client.get("/.well-known/oauth-protected-resource/mcp", headers=forwarded).json()
    assert resource["resource"] == "https://localhost/mcp"
    assert resource["authorization_servers"] == ["https://localhost"]
    server = client.get("/.well-known/oauth-authorization-server", headers=forwarded).json()
    assert server["issuer"] == "https://localhost"
    assert server["token_endpoint"] == "https://localhost/oauth/token/"


def test_registration_accepts_https_and_loopback_redirects_only(client: Client) -> None:
    data = _register(client, redirect_uris=["https://app.example/cb", "http://localhost/cb", "http://[::1]:9/cb"])
    application = Application.objects.get(client_id=data["client_id"])
    assert application.client_type == Application.CLIENT_PUBLIC
    assert "client_secret" not in data
    for bad in (["http://app.example/cb"], ["javascript:alert(1)"], ["https://app.example/cb#frag"], [], "x", [3]):
        response = client.post(
            "/oauth/register/", {"client_name": "X", "redirect_uris": bad}, content_type="application/json"
        )
        assert response.status_code == 400, bad
        assert response.json()["error"] in ("invalid_redirect_uri", "invalid_client_metadata")
    assert client.post("/oauth/register/", "{not json", content_type="application/json").status_code == 400
    response = client.post(
        "/oauth/register/", {"client_name": 5, "redirect_uris": [REDIRECT]}, content_type="application/json"
    )
    assert response.status_code == 400


def test_registration_is_rate_limited_per_address(client: Client, settings: Any) -> None:
    settings.OAUTH_REGISTRATIONS_PER_HOUR = 2
    _register(client)
    _register(client)
    response = client.post(
        "/oauth/register/", {"client_name": "X", "redirect_uris": [REDIRECT]}, content_type="application/json"
    )
    assert response.status_code == 429
    assert "Too many registrations" in response.json()["error_description"]


def test_the_consent_page_says_who_asks_where_the_answer_goes_and_what_it_reaches(
    browser: Client, registered: dict[str, Any]
) -> None:
    _, challenge = _pkce()
    page = browser.get("/oauth/authorize/", _authorize_params(registered["client_id"], challenge))
    html = page.content.decode()
    assert page.status_code == 200
    assert "Test Desktop" in html and "127.0.0.1:8765" in html
    assert oauth.SCOPES["mcp:tools"] in html and oauth.SCOPES["mcp:agents"] in html
    assert oauth.SCOPES["mcp:approve"] not in html
    # The browser may follow the answer's redirect to the client's own origin.
    assert "form-action 'self' http://127.0.0.1:8765" in page["Content-Security-Policy"]


def test_a_client_cannot_skip_the_consent_page_with_approval_prompt_auto(
    browser: Client, registered: dict[str, Any]
) -> None:
    # The user allowed this client once: it holds a live token.
    verifier, challenge = _pkce()
    code = _code(browser, registered["client_id"], challenge)
    body = {"grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT, "code_verifier": verifier}
    assert _token(Client(), **body, client_id=registered["client_id"], resource=MCP).status_code == 200
    # Someone else's PKCE challenge, asking to skip the page: the page is shown, no code leaves.
    _, theirs = _pkce()
    for prompt in ("auto", "force", "none"):
        params = _authorize_params(registered["client_id"], theirs, approval_prompt=prompt)
        page = browser.get("/oauth/authorize/", params)
        assert page.status_code == 200, (prompt, page.get("Location"))
        assert b"consent-form" in page.content


def test_signed_out_users_sign_in_first(client: Client, registered: dict[str, Any]) -> None:
    _, challenge = _pkce()
    response = client.get("/oauth/authorize/", _authorize_params(registered["client_id"], challenge))
    assert response.status_code == 302 and response["Location"].startswith("/login/")


def test_the_code_flow_issues_a_token_bound_to_mcp(browser: Client, registered: dict[str, Any], user: Any) -> None:
    verifier, challenge = _pkce()
    code = _code(browser, registered["client_id"], challenge)
    response = _token(
        Client(),
        grant_type="authorization_code",
        code=code,
        redirect_uri=REDIRECT,
        client_id=registered["client_id"],
        code_verifier=verifier,
        resource=MCP,
    )
    assert response.status_code == 200, response.content
    token = response.json()
    assert token["token_type"] == "Bearer" and token["refresh_token"]
    assert set(token["scope"].split()) == {"mcp:tools", "mcp:agents"}
    record = AccessToken.objects.get(token_checksum=hashlib.sha256(token["access_token"].encode()).hexdigest())
    assert record.resource == [MCP] and record.user == user
    # Stored as a hash only (RFC 9700): a database dump holds no usable token.
    assert record.token != token["access_token"]


def test_a_client_that_names_no_resource_still_gets_a_token_for_mcp_only(
    browser: Client, registered: dict[str, Any]
) -> None:
    verifier, challenge = _pkce()
    params = _authorize_params(registered["client_id"], challenge)
    del params["resource"]
    response = _consent(browser, params)
    code = parse_qs(urlsplit(response["Location"]).query)["code"][0]
    token = _token(
        Client(),
        grant_type="authorization_code",
        code=code,
        redirect_uri=REDIRECT,
        client_id=registered["client_id"],
        code_verifier=verifier,
    ).json()
    checksum = hashlib.sha256(token["access_token"].encode()).hexdigest()
    assert AccessToken.objects.get(token_checksum=checksum).resource == [MCP]


def test_pkce_is_required_and_checked(browser: Client, registered: dict[str, Any]) -> None:
    _, challenge = _pkce()
    params = _authorize_params(registered["client_id"], challenge)
    del params["code_challenge"], params["code_challenge_method"]
    response = browser.get("/oauth/authorize/", params)
    assert response.status_code == 302 and "error=invalid_request" in response["Location"]
    plain = browser.get("/oauth/authorize/", {**params, "code_challenge": "x" * 50, "code_challenge_method": "plain"})
    assert plain.status_code == 400 and b"S256" in plain.content

    _, challenge = _pkce()
    code = _code(browser, registered["client_id"], challenge)
    wrong = _token(
        Client(),
        grant_type="authorization_code",
        code=code,
        redirect_uri=REDIRECT,
        client_id=registered["client_id"],
        code_verifier=_pkce()[0],
        resource=MCP,
    )
    assert wrong.status_code == 400 and wrong.json()["error"] == "invalid_grant"


def test_a_redirect_uri_that_was_not_registered_is_refused_without_redirecting(
    browser: Client, registered: dict[str, Any]
) -> None:
    _, challenge = _pkce()
    params = _authorize_params(registered["client_id"], challenge, redirect_uri="https://evil.example/cb")
    response = browser.get("/oauth/authorize/", params)
    assert response.status_code == 400
    assert "evil.example" not in response.get("Location", "")
    assert b"consent-error" in response.content

    verifier, challenge = _pkce()
    code = _code(browser, registered["client_id"], challenge)
    other = _token(
        Client(),
        grant_type="authorization_code",
        code=code,
        redirect_uri="http://127.0.0.1:9999/other",
        client_id=registered["client_id"],
        code_verifier=verifier,
        resource=MCP,
    )
    assert other.status_code == 400 and other.json()["error"] == "invalid_request"


def test_another_resource_is_refused_at_every_step(browser: Client, registered: dict[str, Any]) -> None:
    _, challenge = _pkce()
    params = _authorize_params(registered["client_id"], challenge, resource="https://other.example/mcp")
    response = browser.get("/oauth/authorize/", params)
    assert response.status_code == 400 and oauth.WRONG_RESOURCE.encode() in response.content

    # A consent form whose hidden resource was changed in the browser.
    page = browser.get("/oauth/authorize/", _authorize_params(registered["client_id"], challenge))
    form = {k: v for k, v in page.context["form"].initial.items() if v is not None}
    tampered = browser.post("/oauth/authorize/", {**form, "allow": "Authorize", "resource": "https://other.example/"})
    assert tampered.status_code == 400

    verifier, challenge = _pkce()
    code = _code(browser, registered["client_id"], challenge)
    response = _token(
        Client(),
        grant_type="authorization_code",
        code=code,
        redirect_uri=REDIRECT,
        client_id=registered["client_id"],
        code_verifier=verifier,
        resource="https://other.example/mcp",
    )
    assert response.status_code == 400 and response.json()["error"] == "invalid_target"


def test_a_code_works_once(browser: Client, registered: dict[str, Any]) -> None:
    verifier, challenge = _pkce()
    code = _code(browser, registered["client_id"], challenge)
    body = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": REDIRECT,
        "client_id": registered["client_id"],
        "code_verifier": verifier,
        "resource": MCP,
    }
    assert _token(Client(), **body).status_code == 200
    again = _token(Client(), **body)
    assert again.status_code == 400 and again.json()["error"] == "invalid_grant"


def test_deny_sends_access_denied_back_and_issues_nothing(browser: Client, registered: dict[str, Any]) -> None:
    _, challenge = _pkce()
    response = _consent(browser, _authorize_params(registered["client_id"], challenge), allow=False)
    assert response.status_code == 302
    query = parse_qs(urlsplit(response["Location"]).query)
    assert query["error"] == ["access_denied"] and query["state"] == ["st4te"]
    assert not AccessToken.objects.filter(user__isnull=False).exists()


def test_refresh_tokens_rotate_and_a_reused_one_revokes_the_family(browser: Client, registered: dict[str, Any]) -> None:
    verifier, challenge = _pkce()
    code = _code(browser, registered["client_id"], challenge)
    first = _token(
        Client(),
        grant_type="authorization_code",
        code=code,
        redirect_uri=REDIRECT,
        client_id=registered["client_id"],
        code_verifier=verifier,
        resource=MCP,
    ).json()
    # The access token ran out a moment ago: what a refresh is for.
    AccessToken.objects.update(expires=timezone.now() - timedelta(seconds=5))
    refresh = {"grant_type": "refresh_token", "client_id": registered["client_id"], "resource": MCP}
    second = _token(Client(), **refresh, refresh_token=first["refresh_token"])
    assert second.status_code == 200, second.content
    second_token = second.json()
    assert second_token["refresh_token"] != first["refresh_token"]
    assert second_token["access_token"] != first["access_token"]
    wrong_resource = _token(
        Client(), **{**refresh, "resource": "https://other.example/"}, refresh_token=second_token["refresh_token"]
    )
    assert wrong_resource.status_code == 400 and wrong_resource.json()["error"] == "invalid_target"
    # The old one again: a thief or a replay, so the whole family goes.
    reused = _token(Client(), **refresh, refresh_token=first["refresh_token"])
    assert reused.status_code == 400
    assert _token(Client(), **refresh, refresh_token=second_token["refresh_token"]).status_code == 400


def test_revocation_ends_a_token(browser: Client, registered: dict[str, Any], rf: Any) -> None:
    verifier, challenge = _pkce()
    code = _code(browser, registered["client_id"], challenge)
    token = _token(
        Client(),
        grant_type="authorization_code",
        code=code,
        redirect_uri=REDIRECT,
        client_id=registered["client_id"],
        code_verifier=verifier,
        resource=MCP,
    ).json()
    request = rf.get("/mcp")
    assert oauth_caller(request, token["access_token"]) is not None
    response = Client().post("/oauth/revoke/", {"token": token["access_token"], "client_id": registered["client_id"]})
    assert response.status_code == 200
    assert oauth_caller(rf.get("/mcp"), token["access_token"]) is None


def test_scopes_map_onto_what_the_caller_reaches(browser: Client, registered: dict[str, Any], rf: Any) -> None:
    verifier, challenge = _pkce()
    code = _code(browser, registered["client_id"], challenge, scope="mcp:agents mcp:approve")
    token = _token(
        Client(),
        grant_type="authorization_code",
        code=code,
        redirect_uri=REDIRECT,
        client_id=registered["client_id"],
        code_verifier=verifier,
        resource=MCP,
    ).json()
    caller = oauth_caller(rf.get("/mcp"), token["access_token"])
    assert caller is not None
    assert (caller.tools, caller.agents, caller.can_approve) == (False, True, True)
    assert caller.oauth_client == "Test Desktop"
    assert caller.oauth_client_id == registered["client_id"]  # who it is, whatever it calls itself
    # Another audience (the same token presented to a server on another host) is refused.
    assert oauth_caller(rf.get("/mcp", HTTP_HOST="localhost"), token["access_token"]) is None
    assert oauth_caller(rf.get("/mcp"), "not-a-token") is None


def test_the_account_page_lists_connected_apps_and_disconnects_only_ones_own(
    browser: Client, registered: dict[str, Any], other_user: Any, user: Any
) -> None:
    verifier, challenge = _pkce()
    code = _code(browser, registered["client_id"], challenge)
    _token(
        Client(),
        grant_type="authorization_code",
        code=code,
        redirect_uri=REDIRECT,
        client_id=registered["client_id"],
        code_verifier=verifier,
        resource=MCP,
    )
    page = browser.get("/account/").content.decode()
    assert "Test Desktop" in page and "tools, agents" in page
    application = Application.objects.get(client_id=registered["client_id"])

    stranger = Client()
    stranger.force_login(other_user)
    assert stranger.post(f"/account/clients/{application.pk}/disconnect/").status_code == 404
    assert stranger.get(f"/account/clients/{application.pk}/disconnect/").status_code == 405
    assert AccessToken.objects.filter(user=user).exists()

    response = browser.post(f"/account/clients/{application.pk}/disconnect/")
    assert response.status_code == 302
    assert not AccessToken.objects.filter(user=user).exists()
    assert not RefreshToken.objects.filter(user=user, revoked=None).exists()
    assert "No apps connected" in browser.get("/account/").content.decode()
    assert browser.post(f"/account/clients/{application.pk}/disconnect/").status_code == 404


def test_a_new_password_disconnects_every_client(
    browser: Client, registered: dict[str, Any], user: Any, rf: Any
) -> None:
    verifier, challenge = _pkce()
    code = _code(browser, registered["client_id"], challenge)
    token = _token(
        Client(),
        grant_type="authorization_code",
        code=code,
        redirect_uri=REDIRECT,
        client_id=registered["client_id"],
        code_verifier=verifier,
        resource=MCP,
    ).json()
    user.set_password("a brand new passphrase")
    user.save()
    assert oauth_caller(rf.get("/mcp"), token["access_token"]) is None
    refreshed = _token(
        Client(), grant_type="refresh_token", client_id=registered["client_id"], refresh_token=token["refresh_token"]
    )
    assert refreshed.status_code == 400


def test_admins_see_clients_and_tokens_in_admin(browser: Client, registered: dict[str, Any], user: Any) -> None:
    verifier, challenge = _pkce()
    code = _code(browser, registered["client_id"], challenge)
    _token(
        Client(),
        grant_type="authorization_code",
        code=code,
        redirect_uri=REDIRECT,
        client_id=registered["client_id"],
        code_verifier=verifier,
        resource=MCP,
    )
    from django.contrib.auth import get_user_model

    admin = Client()
    admin.force_login(get_user_model().objects.create_superuser("root", password="x" * 20))
    for model in ("application", "accesstoken", "refreshtoken", "grant"):
        page = admin.get(f"/admin/oauth2_provider/{model}/")
        assert page.status_code == 200, model
    assert b"Test Desktop" in admin.get("/admin/oauth2_provider/application/").content
    application = Application.objects.get(client_id=registered["client_id"])
    assert admin.get(f"/admin/oauth2_provider/application/{application.pk}/change/").status_code == 200
    token = AccessToken.objects.get(user=user)
    assert admin.get(f"/admin/oauth2_provider/accesstoken/{token.pk}/change/").status_code == 200


@pytest.mark.django_db(transaction=True)
def test_at_mcp_a_request_without_credentials_starts_the_flow_and_is_not_a_failed_sign_in(
    user: Any, rf: Any, settings: Any
) -> None:
    from core import backoff
    from hub.caller import resolve
    from hub.models import ApiToken

    settings.TOKEN_FREE_FAILURES = 3
    _, api_token = ApiToken.issue(user, "script")
    for _ in range(5):
        bare = rf.post("/mcp")
        assert resolve(bare, oauth_tokens=True) is None and not backoff.refused(bare)
    assert resolve(rf.post("/mcp", HTTP_AUTHORIZATION=f"Bearer {api_token}"), oauth_tokens=True) is not None
    # Wrong tokens, API or OAuth, count: the address waits, but a good token still works.
    for wrong in ("tsk_wrong", "oauth-wrong", "x"):
        request = rf.post("/mcp", HTTP_AUTHORIZATION=f"Bearer {wrong}")
        assert resolve(request, oauth_tokens=True) is None
    assert backoff.refused(request)
    assert resolve(rf.post("/mcp", HTTP_AUTHORIZATION=f"Bearer {api_token}"), oauth_tokens=True) is not None


HOSTILE_AUTHORIZE: list[dict[str, str]] = [
    {},
    {"client_id": "nope", "response_type": "code"},
    {"client_id": "https://127.0.0.1/x.json", "response_type": "code", "redirect_uri": REDIRECT},
    {"client_id": "https://169.254.169.254/latest/meta-data", "response_type": "code"},
    {"client_id": "x" * 5000, "response_type": "code"},
    {"response_type": "token", "redirect_uri": REDIRECT},
    {"response_type": "code", "scope": "mcp:tools admin" * 50},
    {"response_type": "code", "code_challenge_method": "S256", "code_challenge": "\x00\u202e"},
    {"response_type": "code", "resource": "not a uri"},
    {"response_type": "code", "redirect_uri": "javascript:alert(1)"},
]


@pytest.mark.parametrize("params", HOSTILE_AUTHORIZE)
def test_hostile_authorization_requests_get_a_clear_4xx_never_a_500(
    browser: Client, registered: dict[str, Any], params: dict[str, str]
) -> None:
    _, challenge = _pkce()
    full = {**_authorize_params(registered["client_id"], challenge), **params}
    for query in (params, full):
        response = browser.get("/oauth/authorize/", query)
        assert response.status_code < 500, query
        if response.status_code == 302:  # an error sent back to the registered redirect URI only
            assert response["Location"].startswith(REDIRECT), query
            assert "code=" not in response["Location"] or query == full
    # A consent form posted with fields missing or forged.
    for form in ({}, {"client_id": registered["client_id"], "allow": "Authorize"}, {**full, "allow": "1"}):
        assert browser.post("/oauth/authorize/", form).status_code < 500


def test_hostile_token_registration_and_revocation_requests_get_a_4xx(client: Client) -> None:
    for body in (
        {},
        {"grant_type": "authorization_code", "code": "x"},
        {"grant_type": "password", "username": "ada", "password": "x"},
        {"grant_type": "client_credentials"},
        {"grant_type": "refresh_token", "refresh_token": "x" * 10000},
        {"grant_type": "\x00"},
    ):
        response = client.post("/oauth/token/", body)
        assert 400 <= response.status_code < 500, body
        assert response["Content-Type"] == "application/json"
    assert client.get("/oauth/token/").status_code == 405
    nested: Any = []
    for _ in range(200):
        nested = [nested]
    for payload in (
        {"redirect_uris": nested},
        {"redirect_uris": ["https://a.example/cb"], "client_name": "x" * 10000},
        {"redirect_uris": ["https://a.example/cb"], "grant_types": ["password"]},
        {"redirect_uris": ["https://a.example/cb"], "grant_types": ["client_credentials"]},
        {"redirect_uris": ["https://a.example/cb"], "response_types": ["token"]},
        {"redirect_uris": ["https://a.example/cb"], "grant_types": "authorization_code"},
        {"redirect_uris": ["https://a.example/cb"], "token_endpoint_auth_method": "private_key_jwt"},
        [1, 2],
        "string",
    ):
        response = client.post("/oauth/register/", payload, content_type="application/json")
        assert 400 <= response.status_code < 500, payload
    assert client.post("/oauth/revoke/", {"token": "x"}).status_code < 500
    assert client.post("/oauth/revoke/", {}).status_code < 500
