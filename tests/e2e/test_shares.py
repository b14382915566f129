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
    # Read-only: no composer, no chat socket (the bell's user socket is on every signed-in
    # page), no buttons or forms among the messages.
    assert page.locator("[ws-connect]:not(.notify-socket), #composer").count() == 0
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


def test_shared_files_download_only_through_a_link_that_includes_them(
    axe_signed_in: Page, browser: Browser, stack: Any, demo_model: LLMModel, tmp_path: Any
) -> None:
    from django.core.files.base import ContentFile

    from chat.models import ChatShare, Message, Turn
    from toolsets.files.models import Attachment

    from .test_accessibility import Checker

    page = axe_signed_in
    owner = get_user_model().objects.get(username="ada")
    chat = Chat.objects.create(owner=owner, model=demo_model, title="Quarterly figures")
    turn = Turn.objects.create(chat=chat, model=demo_model, status=Turn.Status.COMPLETED)
    question = Message.objects.create(chat=chat, turn=turn, role="user", content="What do these figures say?")
    Message.objects.create(chat=chat, turn=turn, role="assistant", step=0, content="Revenue grew **12 %**.")
    data = b"quarter,revenue\nQ1,100\nQ2,112\n"
    attachment = Attachment(
        owner=owner, chat=chat, name="figures.csv", size=len(data), kind="csv", content_type="text/csv"
    )
    attachment.file.save("figures.csv", ContentFile(data), save=False)
    attachment.status = Attachment.Status.READY
    attachment.save()
    attachment.messages.add(question)

    page.goto(f"{stack.url}/chats/{chat.pk}/share/")
    page.get_by_test_id("share-create").click()  # without files
    expect(page.get_by_test_id("share-link")).to_have_count(1)
    page.get_by_test_id("share-files").check()
    page.get_by_test_id("share-create").click()
    expect(page.get_by_test_id("share-link")).to_have_count(2)
    with_files = ChatShare.objects.get(chat=chat, include_files=True)
    without = ChatShare.objects.get(chat=chat, include_files=False)

    get_user_model().objects.create_user("bob", password=PASSWORD)
    # The refused download's 404 is expected.
    with browser_page(
        browser, stack.url, signed_in=False, bypass_csp=True, allow_console=("Failed to load resource",)
    ) as bob:
        login(bob, stack.url, "bob")
        bob.goto(f"{stack.url}/s/{with_files.token}/")
        link = bob.get_by_test_id("shared-file")
        expect(link).to_have_text("figures.csv")
        check = Checker(bob, full_page=True)
        check("shared-chat-with-files")
        shot(bob, "share-with-files")
        with bob.expect_download() as download:
            link.click()
        saved = tmp_path / "figures.csv"
        download.value.save_as(saved)
        assert download.value.suggested_filename == "figures.csv" and saved.read_bytes() == data

        bob.goto(f"{stack.url}/s/{without.token}/")
        expect(bob.get_by_test_id("shared-messages")).to_contain_text("What do these figures say?")
        expect(bob.get_by_test_id("shared-file")).to_have_count(0)
        response = bob.goto(f"{stack.url}/s/{without.token}/files/{attachment.pk}/")
        assert response is not None and response.status == 404
        # The owner's own download address is not the viewer's.
        response = bob.goto(f"{stack.url}/files/{attachment.pk}/download/")
        assert response is not None and response.status == 404
        check.assert_clean()
