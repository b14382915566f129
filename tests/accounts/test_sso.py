"""Single sign-on's rules without a browser: group mapping, the adapter that feeds allauth,
verified-e-mail matching, the password switch, the admin form and sign-out. The whole flow
against a real provider is in tests/e2e/test_sso.py."""

from __future__ import annotations

import socket
from typing import Any

import pytest
from allauth.core.exceptions import ImmediateHttpResponse
from allauth.socialaccount.models import SocialAccount, SocialApp, SocialLogin
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.contrib.sessions.backends.cache import SessionStore
from django.db import connection
from django.test import Client, RequestFactory

from accounts import sso
from accounts.models import AccountSettings, OIDCProvider, ProviderGroup

pytestmark = pytest.mark.django_db
SECRET = "an-oidc-client-secret-4242"
PASSWORD = "a long test passphrase"


def _provider(slug: str = "acme", **fields: Any) -> OIDCProvider:
    defaults = {
        "label": f"Sign in with {slug}",
        "issuer": "https://sso.example.com/realms/acme",
        "client_id": f"tessera-{slug}",
        "client_secret": SECRET,
        "create_users": True,
    }
    return OIDCProvider.objects.create(slug=slug, **{**defaults, **fields})


def _user(username: str = "alice", **fields: Any) -> Any:
    return get_user_model().objects.create_user(username, password=PASSWORD, **fields)


def _groups(user: Any) -> set[str]:
    return set(user.groups.values_list("name", flat=True))


def _request() -> Any:
    request = RequestFactory().get("/accounts/oidc/acme/login/callback/")
    request.session = SessionStore()
    return request


def _sociallogin(slug: str, claims: dict[str, Any], uid: str = "subject-1") -> SocialLogin:
    account = SocialAccount(provider=slug, uid=uid, extra_data={"userinfo": claims})
    return SocialLogin(account=account, user=get_user_model()(email=claims.get("email", "")))


# --- Group mapping -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("claim", "names"),
    [
        (["eng", " sales ", "eng", "", 7, None], ["eng", "sales"]),
        ("eng", ["eng"]),
        (None, []),
        ({"eng": True}, []),
        (["x" * 151, "ok"], ["ok"]),
    ],
)
def test_group_names_take_strings_and_lists_of_strings_only(claim: Any, names: list[str]) -> None:
    assert sso.group_names(claim) == names


def test_groups_follow_the_claim_and_hand_given_groups_stay() -> None:
    acme = _provider()
    for name in ("eng", "sales", "hand"):
        Group.objects.create(name=name)
    alice = _user()
    alice.groups.add(Group.objects.get(name="hand"))

    assert sso.sync_groups(alice, acme, {"groups": ["eng", "hand", "unknown"]}) == ({"eng"}, set())
    assert _groups(alice) == {"eng", "hand"}
    # Listed by the provider but given by hand: no record, so the provider never removes it.
    assert not ProviderGroup.objects.filter(group__name="hand").exists()

    assert sso.sync_groups(alice, acme, {"groups": ["sales"]}) == ({"sales"}, {"eng"})
    assert _groups(alice) == {"sales", "hand"}
    assert not Group.objects.filter(name="unknown").exists()


def test_a_missing_claim_takes_provider_groups_away() -> None:
    acme = _provider()
    Group.objects.create(name="eng")
    alice = _user()
    sso.sync_groups(alice, acme, {"groups": ["eng"]})
    sso.sync_groups(alice, acme, {})
    assert _groups(alice) == set()


def test_a_group_two_providers_gave_stays_until_neither_lists_it() -> None:
    acme, other = _provider(), _provider("other")
    Group.objects.create(name="eng")
    alice = _user()
    sso.sync_groups(alice, acme, {"groups": ["eng"]})
    # Already a member: the second provider's claim adds nothing, so it records nothing either.
    sso.sync_groups(alice, other, {"groups": ["eng"]})
    sso.sync_groups(alice, acme, {"groups": []})
    assert _groups(alice) == set()
    ProviderGroup.objects.all().delete()
    sso.sync_groups(alice, acme, {"groups": ["eng"]})
    alice.groups.remove(Group.objects.get(name="eng"))
    sso.sync_groups(alice, other, {"groups": ["eng"]})
    sso.sync_groups(alice, acme, {"groups": []})
    assert _groups(alice) == {"eng"}  # still given by the other provider


def test_groups_are_created_only_when_the_provider_says_so() -> None:
    alice = _user()
    sso.sync_groups(alice, _provider(), {"groups": ["new-team"]})
    assert not Group.objects.filter(name="new-team").exists()
    sso.sync_groups(alice, _provider("maker", create_groups=True), {"groups": ["new-team"]})
    assert _groups(alice) == {"new-team"}


def test_an_empty_groups_claim_name_leaves_groups_alone() -> None:
    acme = _provider(groups_claim="")
    Group.objects.create(name="eng")
    alice = _user()
    alice.groups.add(Group.objects.get(name="eng"))
    assert sso.sync_groups(alice, acme, {"groups": []}) == (set(), set())
    assert _groups(alice) == {"eng"}


def test_a_custom_groups_claim_is_read() -> None:
    acme = _provider(groups_claim="roles")
    Group.objects.create(name="admins")
    alice = _user()
    sso.sync_groups(alice, acme, {"groups": ["nope"], "roles": ["admins"]})
    assert _groups(alice) == {"admins"}


# --- The adapter ---------------------------------------------------------------------------------


def test_the_secret_is_encrypted_at_rest_and_handed_to_allauth_decrypted() -> None:
    _provider()
    with connection.cursor() as cursor:
        cursor.execute("SELECT client_secret FROM accounts_oidcprovider")
        (stored,) = cursor.fetchone()
    assert stored.startswith("fernet:") and SECRET not in stored
    (app,) = sso.SocialAccountAdapter().list_apps(None, provider="acme")
    assert app.secret == SECRET and app.client_id == "tessera-acme"
    assert app.settings["server_url"] == "https://sso.example.com/realms/acme"
    assert app.settings["oauth_pkce_enabled"] is True
    assert not SocialApp.objects.exists()  # allauth's own table is never used


def test_the_secret_is_redacted_from_errors_and_checked_by_check_secrets() -> None:
    from core import secrets_check
    from core.redact import redact

    provider = _provider()
    OIDCProvider.objects.get(pk=provider.pk).client_secret  # noqa: B018 - decrypting registers it
    assert SECRET not in redact(f"invalid_client: client_secret {SECRET} was refused")
    report = secrets_check.check()
    assert report.ok
    assert {f.label: f.checked for f in report.fields}["accounts.OIDCProvider.client_secret"] == 1


def test_only_enabled_providers_are_apps() -> None:
    _provider()
    _provider("off", enabled=False)
    adapter = sso.SocialAccountAdapter()
    assert [a.provider_id for a in adapter.list_apps(None)] == ["acme"]
    assert adapter.list_apps(None, provider="off") == []
    assert [a.provider_id for a in adapter.list_apps(None, provider="openid_connect")] == ["acme"]
    assert adapter.list_apps(None, provider="acme", client_id="someone-else") == []


def test_scopes_always_include_openid() -> None:
    assert _provider(scopes="email groups").scope_list == ["openid", "email", "groups"]


@pytest.mark.parametrize(
    ("value", "verified"),
    [(True, True), ("true", True), ("TRUE", True), (False, False), ("yes", False), (None, False), (1, False)],
)
def test_email_verified_is_strict(value: Any, verified: bool) -> None:
    assert sso.email_verified({"email_verified": value}) is verified


def test_a_verified_email_links_the_existing_account() -> None:
    _provider()
    bob = _user("bob", email="Bob@Example.com")
    login = _sociallogin("acme", {"email": "bob@example.com", "email_verified": True})
    sso.SocialAccountAdapter().pre_social_login(_request(), login)
    assert SocialAccount.objects.get(provider="acme", uid="subject-1").user == bob


def test_an_unverified_email_matching_an_account_is_refused() -> None:
    _provider()
    _user("bob", email="bob@example.com")
    login = _sociallogin("acme", {"email": "BOB@example.com", "email_verified": False})
    with pytest.raises(ImmediateHttpResponse) as refused:
        sso.SocialAccountAdapter().pre_social_login(_request(), login)
    assert refused.value.response.status_code == 403
    assert "has not verified that address" in refused.value.response.content.decode()
    assert not SocialAccount.objects.exists()


@pytest.mark.parametrize(
    ("fields", "claims", "message"),
    [
        ({"create_users": False}, {"email": "new@example.com", "email_verified": True}, "There is no Tessera account"),
        ({}, {"email_verified": True}, "did not share an e-mail address"),
        ({"enabled": False}, {"email": "new@example.com", "email_verified": True}, "turned off"),
    ],
)
def test_sign_ins_the_provider_settings_do_not_allow_are_refused(
    fields: dict[str, Any], claims: dict[str, Any], message: str
) -> None:
    _provider(**fields)
    with pytest.raises(ImmediateHttpResponse) as refused:
        sso.SocialAccountAdapter().pre_social_login(_request(), _sociallogin("acme", claims))
    assert message in refused.value.response.content.decode()


def test_a_disabled_account_is_not_linked() -> None:
    _provider()
    _user("bob", email="bob@example.com", is_active=False)
    with pytest.raises(ImmediateHttpResponse):
        sso.SocialAccountAdapter().pre_social_login(
            _request(), _sociallogin("acme", {"email": "bob@example.com", "email_verified": True})
        )
    assert not SocialAccount.objects.exists()


def test_a_new_user_may_sign_up_where_the_provider_allows_it() -> None:
    _provider()
    login = _sociallogin("acme", {"email": "new@example.com", "email_verified": True})
    adapter = sso.SocialAccountAdapter()
    adapter.pre_social_login(_request(), login)  # not refused
    assert adapter.is_open_for_signup(_request(), login) is True
    _provider("closed", create_users=False)
    assert adapter.is_open_for_signup(_request(), _sociallogin("closed", {})) is False


# --- Pages ---------------------------------------------------------------------------------------


def test_the_sign_in_page_shows_enabled_providers_and_allows_their_origins(client: Client) -> None:
    _provider(label="Sign in with Keycloak")
    _provider("off", label="Hidden one", enabled=False, issuer="https://other.example.org")
    response = client.get("/login/")
    page = response.content.decode()
    assert "Sign in with Keycloak" in page and 'action="/accounts/oidc/acme/login/"' in page
    assert "Hidden one" not in page
    csp = response["Content-Security-Policy"]
    assert "form-action 'self' https://sso.example.com" in csp and "other.example.org" not in csp


@pytest.mark.parametrize("slug", ["", "has space", "../x"])
def test_a_provider_the_page_cannot_link_to_is_skipped_with_a_warning(
    client: Client, slug: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A row saved from a shell skips the form's validation: one bad slug must not take the
    sign-in page down for everyone."""
    _provider(label="Sign in with Keycloak")
    OIDCProvider.objects.create(slug=slug, label="Broken one", issuer="https://b.example.org", client_id="b")

    with caplog.at_level("WARNING", logger="accounts.sso"):
        response = client.get("/login/")

    page = response.content.decode()
    assert response.status_code == 200
    assert "Sign in with Keycloak" in page and "Broken one" not in page
    assert "b.example.org" not in response["Content-Security-Policy"]
    assert any("Broken one" in r.getMessage() for r in caplog.records)


def test_without_providers_the_sign_in_page_is_as_before(client: Client) -> None:
    response = client.get("/login/")
    assert "form-action 'self';" in response["Content-Security-Policy"] + ";"
    assert 'id="id_password"' in response.content.decode() and "sso-list" not in response.content.decode()


def test_starting_a_sign_in_needs_a_post_and_an_enabled_provider(client: Client) -> None:
    _provider()
    _provider("off", enabled=False)
    assert client.get("/accounts/oidc/acme/login/").status_code == 200  # a page pointing to the sign-in page
    assert client.post("/accounts/oidc/off/login/").status_code == 404
    assert client.get("/accounts/oidc/off/login/callback/?code=x&state=y").status_code == 404
    assert client.get("/accounts/oidc/nobody/login/callback/?code=x&state=y").status_code == 404


def test_a_callback_with_an_unknown_state_is_refused(client: Client) -> None:
    _provider()
    response = client.get("/accounts/oidc/acme/login/callback/?code=x&state=made-up")
    assert response.status_code == 401 and "could not be completed" in response.content.decode()
    assert not client.session.get("_auth_user_id")


def test_allauth_pages_by_name_are_tessera_pages(client: Client) -> None:
    assert client.get("/accounts/sso/cancelled/").status_code == 400
    assert client.get("/accounts/sso/signup/").status_code == 403
    assert client.get("/accounts/sso/inactive/").status_code == 403


# --- Password sign-in switch ---------------------------------------------------------------------


def _password_off() -> None:
    AccountSettings.objects.update_or_create(pk=1, defaults={"password_signin": False})


def test_password_sign_in_off_refuses_everyone_but_superusers() -> None:
    _user("ada")
    get_user_model().objects.create_superuser("root", password=PASSWORD)
    _password_off()
    refused = Client(REMOTE_ADDR="203.0.113.9").post("/login/", {"username": "ada", "password": PASSWORD})
    assert refused.status_code == 200 and "correct username and password" in refused.content.decode()
    assert "for administrators only" in refused.content.decode()
    admin_refused = Client().post("/admin/login/", {"username": "ada", "password": PASSWORD})
    assert "_auth_user_id" not in admin_refused.client.session
    allowed = Client().post("/login/", {"username": "root", "password": PASSWORD})
    assert allowed.status_code == 302 and allowed["Location"] == "/"


def test_a_refused_password_counts_as_a_failed_attempt(settings: Any) -> None:
    settings.SIGNIN_FREE_FAILURES = 2
    _user("ada")
    _password_off()
    client = Client(REMOTE_ADDR="203.0.113.9")
    assert client.post("/login/", {"username": "ada", "password": PASSWORD}).status_code == 200
    assert client.post("/login/", {"username": "ada", "password": PASSWORD}).status_code == 429


def test_password_sign_in_is_on_by_default() -> None:
    _user("ada")
    assert AccountSettings.load().password_signin is True
    assert Client().post("/login/", {"username": "ada", "password": PASSWORD}).status_code == 302


# --- Admin ---------------------------------------------------------------------------------------


def test_admin_adds_a_provider_without_the_secret_ever_shown(admin_client: Client) -> None:
    form = {
        "label": "Sign in with Authentik",
        "slug": "authentik",
        "issuer": "https://auth.example.com/application/o/tessera/",
        "client_id": "tessera",
        "client_secret": SECRET,
        "scopes": "openid  email profile",
        "groups_claim": "groups",
        "enabled": "on",
        "order": "0",
    }
    response = admin_client.post("/admin/accounts/oidcprovider/add/", form)
    assert response.status_code == 302
    provider = OIDCProvider.objects.get(slug="authentik")
    assert provider.client_secret == SECRET and provider.issuer == "https://auth.example.com/application/o/tessera"
    assert provider.scopes == "openid email profile"
    page = admin_client.get(f"/admin/accounts/oidcprovider/{provider.pk}/change/").content.decode()
    assert SECRET not in page and "/accounts/oidc/authentik/login/callback/" in page
    # Saving without typing the secret again keeps it.
    admin_client.post(f"/admin/accounts/oidcprovider/{provider.pk}/change/", {**form, "client_secret": ""})
    provider.refresh_from_db()
    assert provider.client_secret == SECRET


@pytest.mark.parametrize(
    "issuer", ["ftp://sso.example.com", "https://sso.example.com/?x=1", "not a url", "javascript:alert(1)"]
)
def test_admin_refuses_a_bad_issuer_without_losing_the_form(admin_client: Client, issuer: str) -> None:
    form = {"label": "Bad", "slug": "bad", "issuer": issuer, "client_id": "c", "scopes": "openid", "order": "0"}
    response = admin_client.post("/admin/accounts/oidcprovider/add/", form)
    assert response.status_code == 200 and "errornote" in response.content.decode()
    assert not OIDCProvider.objects.exists()


# --- Sign-out ------------------------------------------------------------------------------------


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_sign_out_is_local_when_the_provider_cannot_be_reached(client: Client) -> None:
    _provider(issuer=f"http://127.0.0.1:{_closed_port()}")
    alice = _user()
    client.force_login(alice)
    session = client.session
    session[sso.SESSION_KEY] = "acme"
    session.save()
    response = client.post("/logout/")
    assert response.status_code == 302 and response["Location"] == "/login/"
    assert client.get("/").status_code == 302


def test_sign_out_needs_a_post(client: Client) -> None:
    client.force_login(_user())
    assert client.get("/logout/").status_code == 405
    assert client.get("/").status_code == 200


def test_an_unreachable_provider_is_a_clear_error_not_a_crash() -> None:
    _provider(issuer=f"http://127.0.0.1:{_closed_port()}")
    client = Client(raise_request_exception=False)
    response = client.post("/accounts/oidc/acme/login/")
    assert response.status_code == 502
    assert "could not be reached" in response.content.decode()
    callback = client.get("/accounts/oidc/acme/login/callback/?code=x&state=y")
    assert callback.status_code in (401, 502)


@pytest.mark.parametrize("process", ["connect", "redirect", "anything"])
def test_only_a_sign_in_can_be_started(client: Client, process: str) -> None:
    _provider()
    client.force_login(_user())
    response = client.post(f"/accounts/oidc/acme/login/?process={process}")
    assert response.status_code == 400 and "Only signing in" in response.content.decode()
    assert client.post("/accounts/oidc/acme/login/", {"process": process}).status_code == 400


def test_deleting_a_provider_takes_away_only_what_it_alone_gave() -> None:
    acme, other = _provider(), _provider("other")
    for name in ("eng", "shared", "hand"):
        Group.objects.create(name=name)
    alice = _user()
    alice.groups.add(Group.objects.get(name="hand"))
    sso.sync_groups(alice, acme, {"groups": ["eng", "shared", "hand"]})
    ProviderGroup.objects.create(user=alice, group=Group.objects.get(name="shared"), provider=other)
    acme.delete()
    assert _groups(alice) == {"shared", "hand"}
    assert not ProviderGroup.objects.filter(provider_id=acme.pk).exists()
