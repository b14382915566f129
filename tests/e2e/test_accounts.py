"""Accounts in the browser: the admin's open sign-up switch and the sign-up page, changing a
password, and the user's name as the assistant (the demo model) and the sample data use it."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import Browser, Page, expect

from accounts.models import AccountSettings
from toolsets.models import ToolExecution

from .conftest import PASSWORD, browser_page, login, send_and_wait, shot
from .test_accessibility import Checker, set_up_workspace

pytestmark = pytest.mark.e2e
NEW_PASSWORD = "an even longer test passphrase"


def admin_opens_signup() -> None:
    # The switch is a row the admin edits (tests/accounts/test_views.py drives the admin
    # form): the admin UI is not driven here, because the long-lived test server caches content
    # type ids that the database flush between browser tests renumbers.
    AccountSettings.objects.update_or_create(pk=1, defaults={"open_signup": True})


def test_sign_up_is_off_until_the_admin_opens_it(browser: Browser, stack: Any, e2e_user: Any) -> None:
    context = browser.new_context()
    page = context.new_page()
    page.goto(stack.url + "/login/")
    expect(page.get_by_test_id("signup-link")).to_have_count(0)
    response = page.goto(stack.url + "/signup/")
    assert response is not None and response.status == 404
    expect(page.locator("h1")).to_have_text("Sign-up is closed")

    admin_opens_signup()
    page.goto(stack.url + "/login/")
    page.get_by_test_id("signup-link").click()
    page.wait_for_url("**/signup/")
    page.fill("#id_username", "grace")
    page.fill("#id_name", "Grace Hopper")
    page.fill("#id_password1", "password")
    page.fill("#id_password2", "password")
    page.click("button[type=submit]")
    expect(page.locator("#id_password2_error")).to_contain_text("This password is too common")
    expect(page.locator("#id_password2")).to_have_attribute("aria-invalid", "true")
    # What was typed, except the passwords, is still there.
    expect(page.locator("#id_username")).to_have_value("grace")
    expect(page.locator("#id_name")).to_have_value("Grace Hopper")
    shot(page, "signup-errors-light", full_page=True)
    page.fill("#id_password1", NEW_PASSWORD)
    page.fill("#id_password2", NEW_PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(stack.url + "/")
    expect(page.get_by_test_id("account-link")).to_contain_text("Grace Hopper")
    assert get_user_model().objects.get(username="grace").first_name == "Grace Hopper"
    context.close()


def test_change_password_from_the_account_page(page: Page) -> None:
    base = page.base_url  # type: ignore[attr-defined]
    page.get_by_test_id("account-link").click()
    page.wait_for_url("**/account/")
    page.get_by_test_id("change-password-link").click()
    page.wait_for_url("**/account/password/")
    page.fill("#id_old_password", "not my password")
    page.fill("#id_new_password1", NEW_PASSWORD)
    page.fill("#id_new_password2", NEW_PASSWORD)
    page.click("button[type=submit]")
    expect(page.locator("#id_old_password_error")).to_contain_text("Your old password was entered incorrectly")
    page.fill("#id_old_password", PASSWORD)
    page.fill("#id_new_password1", NEW_PASSWORD)
    page.fill("#id_new_password2", NEW_PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url("**/account/password/done/")
    expect(page.locator("h1")).to_have_text("Password changed")
    page.goto(base + "/")
    expect(page.get_by_test_id("account-link")).to_be_visible()  # still signed in here
    page.get_by_role("button", name="Sign out").click()
    page.wait_for_url("**/login/")
    page.fill("#id_username", "ada")
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    expect(page.locator(".form-error")).to_be_visible()
    page.fill("#id_username", "ada")
    page.fill("#id_password", NEW_PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(base + "/")


def test_my_tasks_are_the_tasks_assigned_to_my_name(page: Page) -> None:
    base = page.base_url  # type: ignore[attr-defined]
    page.goto(base + "/account/")
    page.fill("#id_name", "Ada Lovelace")
    page.get_by_test_id("name-form").locator("button[type=submit]").click()
    expect(page.locator(".form-ok")).to_have_text("Your name is saved.")
    set_up_workspace(page)  # the sample data assigns some tasks to the user's name
    page.goto(base + "/")
    expect(page.get_by_test_id("account-link")).to_contain_text("Ada Lovelace")
    send_and_wait(page, "What's on my plate?")
    execution = ToolExecution.objects.get(tool="list_tasks")
    assert execution.arguments["assignee"] == "Ada Lovelace"
    answer = page.locator(".turn").last
    expect(answer).to_contain_text("Accessibility audit of key pages")
    expect(answer).to_contain_text("Draft the Q3 campaign brief")
    expect(answer).not_to_contain_text("Finalize homepage copy")  # Priya's
    shot(page, "demo-my-tasks-light")


@pytest.fixture
def axe_account_page(browser: Browser, stack: Any, e2e_user: Any) -> Iterator[Page]:
    """Signed out, CSP bypassed for axe. The sign-up page answers 404 while sign-up is closed and
    400 to a refused form, which the browser logs: those are the pages working."""
    with browser_page(
        browser, stack.url, signed_in=False, bypass_csp=True, allow_console=("Failed to load resource",)
    ) as page:
        yield page


def test_account_pages_pass_axe_in_both_themes(axe_account_page: Page, browser: Browser, stack: Any) -> None:
    page = axe_account_page
    check = Checker(page, full_page=True)
    page.goto(stack.url + "/signup/")
    check("signup-closed")
    admin_opens_signup()
    page.goto(stack.url + "/login/")
    check("login-with-signup")
    page.goto(stack.url + "/signup/")
    check("signup")
    page.fill("#id_username", "bad name!")
    page.fill("#id_password1", "short")
    page.fill("#id_password2", "other")
    page.click("button[type=submit]")
    expect(page.locator(".errorlist").first).to_be_visible()
    check("signup-errors")
    login(page, stack.url)
    page.goto(stack.url + "/account/")
    check("account")
    page.goto(stack.url + "/account/password/")
    check("password-change")
    page.fill("#id_old_password", "not my password")
    page.fill("#id_new_password1", "short")
    page.fill("#id_new_password2", "short")
    page.click("button[type=submit]")
    expect(page.locator(".errorlist").first).to_be_visible()
    check("password-change-errors")
    page.goto(stack.url + "/account/password/done/")
    check("password-change-done")
    check.assert_clean()


def test_account_pages_on_a_phone(browser: Browser, stack: Any, e2e_user: Any) -> None:
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    page = context.new_page()
    login(page, stack.url)
    page.goto(stack.url + "/account/")
    shot(page, "account-phone", full_page=True)
    page.goto(stack.url + "/account/password/")
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    shot(page, "password-change-phone", full_page=True)
    context.close()


def _lockout_passes() -> None:
    """What the wait does when its time is up: the counts are forgotten (core/backoff.py)."""
    from core.redis_client import sync_client

    client = sync_client()
    for key in client.scan_iter("tessera:rl:backoff:*"):
        client.delete(key)


def _fail_until_locked(page: Page, path: str, username: str) -> None:
    from django.conf import settings

    for attempt in range(1, settings.SIGNIN_FREE_FAILURES + 2):
        page.goto(page.base_url + path)  # type: ignore[attr-defined]
        page.fill("#id_username", username)
        page.fill("#id_password", f"wrong guess {attempt}")
        page.click("[type=submit]")
        if attempt < settings.SIGNIN_FREE_FAILURES:
            expect(page.get_by_test_id("locked-out")).to_have_count(0)
    locked = page.get_by_test_id("locked-out")
    expect(locked).to_contain_text("Too many failed sign-in attempts for this account")
    # Thirty seconds from the last guess; seconds may pass on a loaded machine before the page
    # is drawn.
    expect(locked).to_contain_text(re.compile(r"Try again in (30|2[0-9]) seconds\."))


def test_sign_in_is_throttled_on_the_sign_in_page_and_the_admin(
    browser: Browser, stack: Any, e2e_user: Any, admin_user: Any
) -> None:
    with browser_page(
        browser, stack.url, signed_in=False, bypass_csp=True, allow_console=("Failed to load resource",)
    ) as page:
        check = Checker(page, full_page=True)
        _fail_until_locked(page, "/login/", "ada")
        # The right password is refused too while the guesser's wait lasts.
        page.fill("#id_password", PASSWORD)
        page.click("button[type=submit]")
        expect(page.get_by_test_id("locked-out")).to_be_visible()
        expect(page.locator("#id_username")).to_have_value("ada")
        check("sign-in-locked-out")
        # Meanwhile a colleague at the same address (another browser) signs in to their account.
        colleague = browser.new_context()
        other = colleague.new_page()
        other.goto(stack.url + "/admin/login/")
        other.fill("#id_username", "admin")
        other.fill("#id_password", "password")
        other.click("[type=submit]")
        other.wait_for_url(lambda url: "/admin/login/" not in url)
        colleague.close()

        _lockout_passes()
        login(page, stack.url)
        page.get_by_role("button", name="Sign out").click()
        page.wait_for_url("**/login/")

        _fail_until_locked(page, "/admin/login/", "admin")
        check("admin-sign-in-locked-out")
        page.get_by_role("link", name="Back to sign in").click()
        page.wait_for_url("**/admin/login/")
        _lockout_passes()
        page.fill("#id_username", "admin")
        page.fill("#id_password", "password")
        page.click("[type=submit]")
        page.wait_for_url(lambda url: "/admin/login/" not in url)
        check.assert_clean()


def test_api_token_is_shown_once_and_can_be_revoked(axe_signed_in: Page) -> None:
    page = axe_signed_in
    check = Checker(page, full_page=True)
    page.goto(page.base_url + "/")  # type: ignore[attr-defined]
    page.get_by_test_id("account-link").click()
    page.wait_for_url("**/account/")
    tokens = page.get_by_test_id("api-tokens")
    tokens.locator("#token-name").fill("My script")
    # A token reaches tools and agents unless told otherwise.
    expect(page.get_by_test_id("token-tools")).to_be_checked()
    expect(page.get_by_test_id("token-agents")).to_be_checked()
    page.get_by_test_id("token-agents").uncheck()
    tokens.get_by_role("button", name="Create token").click()
    expect(page.locator(".token-table")).to_contain_text("no agents")
    shot(page, "api-token-created")
    check("account-token-created")
    token = page.get_by_test_id("new-token").locator("code").inner_text()
    assert token.startswith("tsk_")
    page.reload()
    assert token not in page.content()
    expect(page.locator(".token-table")).to_contain_text("My script")
    page.once("dialog", lambda d: d.accept())
    tokens.get_by_role("button", name="Revoke").click()
    expect(page.locator("#tokens")).to_contain_text("No tokens.")
    check.assert_clean()
