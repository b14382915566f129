"""Single sign-on in the browser against a real OpenID provider: npm `oidc-provider` started by
these tests (tests/e2e/oidc_provider.mjs), its own login and consent pages driven like any
provider's, Tessera's side through the live stack (Daphne and a worker)."""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urljoin, urlsplit

import pytest
from allauth.socialaccount.models import SocialAccount
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from playwright.sync_api import Browser, Page, Route, expect

from accounts.models import AccountSettings, OIDCProvider

from .axe import set_theme
from .conftest import PASSWORD, browser_page, login, shot
from .test_accessibility import Checker

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
SECRET = "tessera-test-client-secret-0123456789"
# The provider's pages import a web font nobody can reach here; that is its look, not an error.
PROVIDER_NOISE = ("Failed to load resource",)


@dataclass
class OpenIDProvider:
    issuer: str
    accounts_file: Path

    def accounts(self, accounts: dict[str, dict[str, Any]]) -> None:
        """Who may sign in, with their claims; read by the provider at every sign-in."""
        self.accounts_file.write_text(json.dumps(accounts))


@pytest.fixture(scope="module")
def op(stack: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[OpenIDProvider]:
    folder = tmp_path_factory.mktemp("oidc")
    accounts = folder / "accounts.json"
    accounts.write_text("{}")
    clients = [
        {
            "client_id": f"tessera-{slug}",
            "client_secret": SECRET,
            "redirect_uris": [f"{stack.url}/accounts/oidc/{slug}/login/callback/"],
            "post_logout_redirect_uris": [f"{stack.url}/login/"],
            "token_endpoint_auth_method": "client_secret_post",
        }
        for slug in ("acme", "off")
    ]
    config = folder / "config.json"
    config.write_text(json.dumps({"port": 0, "clients": clients, "accounts": str(accounts)}))
    log = open(folder / "provider.log", "w+")  # noqa: SIM115 - the child process owns it
    process = subprocess.Popen(["node", "tests/e2e/oidc_provider.mjs", str(config)], cwd=ROOT, stdout=log, stderr=log)
    try:
        issuer = ""
        deadline = time.monotonic() + 30
        while not issuer and time.monotonic() < deadline and process.poll() is None:
            found = re.search(r"listening (\S+)", Path(log.name).read_text())
            issuer = found.group(1) if found else ""
            time.sleep(0.1)
        assert issuer, f"oidc-provider did not start: {Path(log.name).read_text()}"
        yield OpenIDProvider(issuer, accounts)
    finally:
        process.terminate()
        process.wait(timeout=10)
        log.close()


def provider(op: OpenIDProvider, slug: str = "acme", **fields: Any) -> OIDCProvider:
    defaults = {
        "label": f"Sign in with {slug.title()}",
        "issuer": op.issuer,
        "client_id": f"tessera-{slug}",
        "client_secret": SECRET,
        "scopes": "openid email profile groups",
        "create_users": True,
    }
    return OIDCProvider.objects.create(slug=slug, **{**defaults, **fields})


@pytest.fixture
def sso_page(browser: Browser, stack: Any, e2e_user: Any) -> Iterator[Page]:
    with browser_page(browser, stack.url, signed_in=False, allow_console=PROVIDER_NOISE) as page:
        yield page


def sign_in_at_provider(page: Page, login: str, *, consent: bool = True) -> None:
    """The provider's own pages: its login form, then its consent page."""
    page.wait_for_selector("input[name=login]")
    page.fill("input[name=login]", login)
    page.fill("input[name=password]", "anything: the dev login takes any password")
    page.click("button[type=submit]")
    if consent:
        page.get_by_role("button", name="Continue").click()


def groups_of(username: str) -> set[str]:
    return set(Group.objects.filter(user__username=username).values_list("name", flat=True))


def test_first_sign_in_creates_the_user_maps_groups_and_signs_out(
    sso_page: Page, op: OpenIDProvider, stack: Any
) -> None:
    page = sso_page
    acme = provider(op)
    for name in ("engineers", "sales", "staff-room"):
        Group.objects.create(name=name)
    op.accounts(
        {
            "alice": {
                "email": "alice@example.com",
                "email_verified": True,
                "name": "Alice Liddell",
                "groups": ["engineers", "no-such-group"],
            }
        }
    )

    page.goto(stack.url + "/login/")
    button = page.get_by_test_id("sso-acme")
    expect(button).to_have_text("Sign in with Acme")
    shot(page, "sso-login-buttons")
    button.click()
    page.wait_for_url(op.issuer + "/**")
    sign_in_at_provider(page, "alice")
    page.wait_for_url(stack.url + "/")

    alice = get_user_model().objects.get(email="alice@example.com")
    assert alice.username == "alice" and alice.first_name == "Alice"
    assert SocialAccount.objects.filter(user=alice, provider="acme", uid="alice").exists()
    # Matched by name; a provider group with no Tessera group of its name gives nothing.
    assert groups_of("alice") == {"engineers"}
    expect(page.get_by_test_id("account-link")).to_contain_text("Alice")
    shot(page, "sso-signed-in")

    # An admin adds a group by hand: the provider never takes that one away.
    alice.groups.add(Group.objects.get(name="staff-room"))

    # Signing out ends the provider's session too (it advertises end_session_endpoint).
    page.get_by_role("button", name="Sign out").click()
    page.wait_for_url(re.compile(re.escape(op.issuer) + ".*"))
    page.get_by_role("button", name="Yes, sign me out").click()
    page.wait_for_url(stack.url + "/login/")
    page.goto(stack.url + "/")
    page.wait_for_url(re.compile(r".*/login/\?next=/$"))

    # The provider now says sales, not engineers: the next sign-in follows it.
    op.accounts({"alice": {"email": "alice@example.com", "email_verified": True, "groups": ["sales"]}})
    page.get_by_test_id("sso-acme").click()
    sign_in_at_provider(page, "alice")  # the sign-out at the provider ended its grant too
    page.wait_for_url(stack.url + "/")
    assert groups_of("alice") == {"sales", "staff-room"}
    assert get_user_model().objects.filter(email="alice@example.com").count() == 1
    assert acme.pk  # the provider row the whole flow went through


def test_a_disabled_provider_has_no_button_and_its_callback_is_refused(
    sso_page: Page, op: OpenIDProvider, stack: Any
) -> None:
    page = sso_page
    acme = provider(op)
    provider(op, "off", enabled=False)
    op.accounts({"carol": {"email": "carol@example.com", "email_verified": True}})

    page.goto(stack.url + "/login/")
    expect(page.get_by_test_id("sso-acme")).to_be_visible()
    expect(page.get_by_test_id("sso-off")).to_have_count(0)
    # Starting a sign-in with it anyway (a stale page, a hand-made form) is refused.
    token = page.locator("input[name=csrfmiddlewaretoken]").first.input_value()
    refused = page.request.post(stack.url + "/accounts/oidc/off/login/", form={"csrfmiddlewaretoken": token})
    assert refused.status == 404

    # Turned off while someone is at the provider's pages: the way back in is refused.
    page.get_by_test_id("sso-acme").click()
    page.wait_for_selector("input[name=login]")
    OIDCProvider.objects.filter(pk=acme.pk).update(enabled=False)
    responses: list[int] = []
    page.on("response", lambda r: responses.append(r.status) if "/login/callback/" in r.url else None)
    sign_in_at_provider(page, "carol")
    page.wait_for_url(re.compile(r".*/accounts/oidc/acme/login/callback/.*"))
    assert responses and responses[-1] == 404
    assert not get_user_model().objects.filter(email="carol@example.com").exists()
    page.goto(stack.url + "/login/")
    expect(page.get_by_test_id("sso-acme")).to_have_count(0)


def test_a_wrong_state_is_refused(sso_page: Page, op: OpenIDProvider, stack: Any) -> None:
    page = sso_page
    provider(op)
    op.accounts({"dave": {"email": "dave@example.com", "email_verified": True}})
    callbacks: list[str] = []

    def hold(route: Route) -> None:
        # The consent form's answer starts the redirects back to Tessera; they are followed here
        # instead of by the browser, and the last one (the callback with code and state) is kept.
        response = route.fetch(max_redirects=0)
        location = response.headers.get("location", "")
        while location and not location.startswith(stack.url):
            response = page.context.request.get(urljoin(op.issuer, location), max_redirects=0)
            location = response.headers.get("location", "")
        callbacks.append(location)
        route.fulfill(status=200, content_type="text/plain", body="held by the test")

    page.goto(stack.url + "/login/")
    page.get_by_test_id("sso-acme").click()
    sign_in_at_provider(page, "dave", consent=False)
    page.route(op.issuer + "/interaction/**", hold)
    page.get_by_role("button", name="Continue").click()
    page.wait_for_selector("text=held by the test")
    page.unroute(op.issuer + "/interaction/**")
    genuine = callbacks[0]
    query = parse_qs(urlsplit(genuine).query)
    assert query["state"][0] and query["code"][0]
    forged = genuine.split("?")[0] + "?" + urlencode({**{k: v[0] for k, v in query.items()}, "state": "forged-state"})

    response = page.goto(forged)
    assert response is not None and response.status == 401
    expect(page.get_by_test_id("sso-error")).to_contain_text("could not be completed")
    assert SECRET not in page.content()
    shot(page, "sso-wrong-state")
    assert not get_user_model().objects.filter(email="dave@example.com").exists()

    # The genuine answer in someone else's browser (a sign-in forced on a victim) is refused too:
    # its state belongs to the session that started the sign-in.
    other = page.context.browser.new_context()  # type: ignore[union-attr]
    stranger = other.new_page()
    replayed = stranger.goto(genuine)
    assert replayed is not None and replayed.status == 401
    other.close()

    # The genuine state still works, so the refusal above was the state's doing.
    page.goto(genuine)
    page.wait_for_url(stack.url + "/")
    assert get_user_model().objects.filter(email="dave@example.com").exists()


def test_an_unverified_email_matching_an_account_is_refused(sso_page: Page, op: OpenIDProvider, stack: Any) -> None:
    page = sso_page
    provider(op)
    bob = get_user_model().objects.create_user("bob", email="Bob@Example.com", password=PASSWORD)
    op.accounts({"mallory": {"email": "bob@example.com", "email_verified": False}})

    page.goto(stack.url + "/login/")
    page.get_by_test_id("sso-acme").click()
    sign_in_at_provider(page, "mallory")
    expect(page.get_by_test_id("sso-refused")).to_contain_text("has not verified that address")
    shot(page, "sso-unverified-refused")
    assert not SocialAccount.objects.exists()
    assert get_user_model().objects.filter(email__iexact="bob@example.com").count() == 1
    page.goto(stack.url + "/")
    page.wait_for_url(re.compile(r".*/login/.*"))

    # The same address, verified this time, signs in to bob's account and links it.
    op.accounts({"mallory": {"email": "bob@example.com", "email_verified": True}})
    page.goto(stack.url + "/login/")
    page.get_by_test_id("sso-acme").click()
    page.wait_for_url(stack.url + "/")  # the provider's session and consent are remembered
    assert SocialAccount.objects.get(uid="mallory").user_id == bob.pk

    # An admin disables the account: the link no longer gets anyone in.
    get_user_model().objects.filter(pk=bob.pk).update(is_active=False)
    page.goto(stack.url + "/login/")
    page.get_by_test_id("sso-acme").click()
    expect(page.get_by_test_id("sso-refused")).to_have_text("This account is disabled.")
    page.goto(stack.url + "/")
    page.wait_for_url(re.compile(r".*/login/.*"))


def test_no_account_is_created_when_the_provider_does_not_allow_it(
    sso_page: Page, op: OpenIDProvider, stack: Any
) -> None:
    page = sso_page
    provider(op, create_users=False)
    op.accounts({"erin": {"email": "erin@example.com", "email_verified": True}})
    page.goto(stack.url + "/login/")
    page.get_by_test_id("sso-acme").click()
    sign_in_at_provider(page, "erin")
    expect(page.get_by_test_id("sso-refused")).to_contain_text("There is no Tessera account for erin@example.com")
    assert not get_user_model().objects.filter(email="erin@example.com").exists()


def test_password_sign_in_off_leaves_it_to_superusers(
    browser: Browser, stack: Any, e2e_user: Any, op: OpenIDProvider
) -> None:
    provider(op)
    get_user_model().objects.create_superuser("root", password=PASSWORD)
    staff = get_user_model().objects.create_user("stafford", password=PASSWORD, is_staff=True)
    AccountSettings.objects.update_or_create(pk=1, defaults={"password_signin": False})

    with browser_page(browser, stack.url, signed_in=False) as page:
        page.goto(stack.url + "/login/")
        expect(page.get_by_test_id("sso-acme")).to_be_visible()
        expect(page.locator("#id_password")).to_be_hidden()
        page.get_by_text("Administrator sign-in").click()
        shot(page, "sso-password-off")
        page.fill("#id_username", "ada")
        page.fill("#id_password", PASSWORD)
        page.click("form[action='/login/'] button[type=submit]")
        expect(page.locator(".form-error")).to_contain_text("correct username and password")
        # The form stays open with the refusal, for the administrator who mistyped.
        expect(page.locator("#id_password")).to_be_visible()
        # Django admin's own sign-in is closed to a non-superuser too.
        page.goto(stack.url + "/admin/login/")
        page.fill("#id_username", staff.username)
        page.fill("#id_password", PASSWORD)
        page.click("input[type=submit]")
        expect(page.locator(".errornote")).to_be_visible()
        page.goto(stack.url + "/login/")
        page.get_by_text("Administrator sign-in").click()
        page.fill("#id_username", "root")
        page.fill("#id_password", PASSWORD)
        page.click("form[action='/login/'] button[type=submit]")
        page.wait_for_url(stack.url + "/")


def test_sign_in_page_with_providers_passes_axe(
    browser: Browser, stack: Any, e2e_user: Any, op: OpenIDProvider
) -> None:
    provider(op)
    provider(op, "off", label="Sign in with Off (second provider)")
    # The refusal page answers 400, which the browser reports as a failed load.
    with browser_page(browser, stack.url, signed_in=False, bypass_csp=True, allow_console=PROVIDER_NOISE) as page:
        check = Checker(page, full_page=True)
        page.goto(stack.url + "/login/")
        check("login-sso")
        AccountSettings.objects.update_or_create(pk=1, defaults={"password_signin": False})
        page.goto(stack.url + "/login/")
        check(
            "login-sso-password-off",
            prepare=lambda: page.locator("details.admin-signin").evaluate("d => d.open = true"),
        )
        page.goto(stack.url + "/accounts/sso/cancelled/")
        check("sso-refused")
        set_theme(page, "dark")
        check.assert_clean()


def test_an_admin_adds_a_provider_in_admin_and_turns_password_sign_in_off(
    browser: Browser, stack: Any, e2e_user: Any, op: OpenIDProvider
) -> None:
    get_user_model().objects.create_superuser("root", password=PASSWORD)
    Group.objects.create(name="engineers")
    op.accounts({"frank": {"email": "frank@example.com", "email_verified": True, "groups": ["engineers"]}})

    with browser_page(browser, stack.url, signed_in=False) as admin:
        login(admin, stack.url, "root")
        admin.goto(stack.url + "/admin/accounts/oidcprovider/add/")
        admin.fill("#id_label", "Sign in with Acme SSO")
        admin.fill("#id_slug", "acme")
        admin.fill("#id_issuer", op.issuer)
        admin.fill("#id_client_id", "tessera-acme")
        admin.fill("#id_client_secret", SECRET)
        admin.fill("#id_scopes", "openid email profile groups")
        admin.check("#id_create_users")
        shot(admin, "sso-admin-add", full_page=True)
        admin.get_by_role("button", name="Save and continue editing").click()
        expect(admin.locator(".messagelist")).to_contain_text("was added successfully")
        # The secret is never sent back to the page: a mask in the placeholder, an empty field.
        expect(admin.locator("#id_client_secret")).to_have_value("")
        assert SECRET not in admin.content()
        expect(admin.locator(".field-redirect_uri")).to_contain_text("/accounts/oidc/acme/login/callback/")
        shot(admin, "sso-admin-change", full_page=True)

        admin.goto(stack.url + "/admin/accounts/accountsettings/")
        admin.uncheck("#id_password_signin")
        admin.get_by_role("button", name="Save", exact=True).click()
        expect(admin.locator(".messagelist")).to_contain_text("changed successfully")

    with browser_page(browser, stack.url, signed_in=False, allow_console=PROVIDER_NOISE) as page:
        page.goto(stack.url + "/login/")
        expect(page.locator("#id_password")).to_be_hidden()
        page.get_by_test_id("sso-acme").click()
        sign_in_at_provider(page, "frank")
        page.wait_for_url(stack.url + "/")
        assert groups_of(get_user_model().objects.get(email="frank@example.com").username) == {"engineers"}


def test_sign_in_page_with_providers_on_a_phone(
    browser: Browser, stack: Any, e2e_user: Any, op: OpenIDProvider
) -> None:
    provider(op, label="Sign in with Acme Corporation's very long single sign-on name")
    provider(op, "off", label="Keycloak")
    phone: dict[str, Any] = {
        "viewport": {"width": 375, "height": 740},
        "device_scale_factor": 2,
        "is_mobile": True,
        "has_touch": True,
    }
    with browser_page(browser, stack.url, signed_in=False, **phone) as page:
        page.goto(stack.url + "/login/")
        expect(page.get_by_test_id("sso-acme")).to_be_visible()
        # Nothing wider than the screen: a long label wraps inside its button.
        assert page.evaluate("document.documentElement.scrollWidth") <= 375
        box = page.get_by_test_id("sso-acme").bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 375
        shot(page, "sso-login-phone", full_page=True)
