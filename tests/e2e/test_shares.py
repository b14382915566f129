"""Shared chats in a browser against the real stack: the owner shares from the chat's menu, the
shared page is a read-only snapshot (no controls, no websocket) that passes axe in both themes,
another user continues it as their own, a signed-out visitor is sent to sign in, and revoking on
the account page makes the link stop working."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import Browser, Page, expect

from chat.models import Chat, LLMModel

from .conftest import PASSWORD, browser_page, login, send_and_wait, shot
from .test_accessibility import Checker

pytestmark = pytest.mark.e2e


def test_share_open_continue_and_revoke(
    axe_signed_in: Page, browser: Browser, stack: Any, demo_model: LLMModel
) -> None:
    page = axe_signed_in
    demo_model.extra_params = {"tokens_per_second": 0}
    demo_model.save()
    owner = get_user_model().objects.get(username="ada")
    chat = Chat.objects.create(owner=owner, model=demo_model, enabled_tools={"clock_math": ["calculate"]})
    page.goto(f"{stack.url}/chats/{chat.pk}/")
    send_and_wait(page, "What is 6*7?")
    expect(page.locator(".tool-card")).to_have_count(1)

    page.locator(f"#chat-link-{chat.pk} summary").click()
    page.get_by_test_id("share-chat").click()
    page.wait_for_url(f"**/chats/{chat.pk}/share/")
    expect(page.get_by_text("read-only snapshot")).to_be_visible()
    page.get_by_test_id("share-create").click()
    link = page.get_by_test_id("share-link")
    expect(link).to_have_count(1)
    url = link.inner_text()
    check = Checker(page, full_page=True)
    check("share-page")

    page.goto(url)
    expect(page.get_by_test_id("share-note")).to_contain_text("read-only snapshot")
    messages = page.get_by_test_id("shared-messages")
    expect(messages.locator(".tool-card")).to_have_count(1)
    expect(messages).to_contain_text("42")
    # Read-only: no composer, no websocket, no buttons or forms among the messages.
    assert page.locator("[ws-connect], #composer").count() == 0
    assert messages.locator("button, form, textarea").count() == 0
    check("shared-chat")
    check.assert_clean()

    with browser_page(browser, stack.url, signed_in=False) as visitor:
        visitor.goto(url)
        visitor.wait_for_url("**/login/**")

    get_user_model().objects.create_user("bob", password=PASSWORD)
    # The revoked link's 404 at the end is expected.
    with browser_page(browser, stack.url, signed_in=False, allow_console=("Failed to load resource",)) as bob:
        login(bob, stack.url, "bob")
        bob.goto(url)
        bob.get_by_test_id("continue-share").click()
        bob.wait_for_url("**/chats/*/")
        expect(bob.locator(".turn")).to_have_count(1)
        expect(bob.locator(".tool-card")).to_have_count(1)
        shot(bob, "share-continued")
        copy = Chat.objects.get(owner__username="bob")
        assert bob.url.endswith(f"/chats/{copy.pk}/")

        page.goto(f"{stack.url}/account/")
        expect(page.get_by_test_id("share-list")).to_contain_text(url)
        shot(page, "share-account-page", full_page=True)
        page.get_by_test_id("share-revoke").click()
        expect(page.get_by_test_id("share-list")).to_have_count(0)

        response = bob.goto(url)
        assert response is not None and response.status == 404
