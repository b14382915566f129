"""Attaching files in the browser: the paperclip, drag and drop, pasted images, upload progress,
removing a chip, a refused file, image thumbnails; the sent message's files look the same after
a reload; screenshots in light, dark and on a phone; axe in both themes."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.toolsets.files import samples

from .axe import axe_violations, blocking, describe, set_theme
from .conftest import browser_page, shot, wait_socket, wait_turn_done

pytestmark = pytest.mark.django_db(transaction=True)


# A refused upload is a 4xx the browser logs; any other console error is a real one.
REFUSED_UPLOAD = ("Failed to load resource",)


@pytest.fixture
def files_page(browser: Browser, stack: Any, e2e_user: Any) -> Iterator[Page]:
    with browser_page(browser, stack.url, allow_console=REFUSED_UPLOAD) as page:
        yield page


def _open_chat(page: Page) -> None:
    from django.contrib.auth import get_user_model

    from chat.models import Chat

    user = get_user_model().objects.get(username="ada")
    chat = Chat.objects.create(owner=user, enabled_tools={})
    page.goto(f"{page.base_url}/chats/{chat.pk}/")  # type: ignore[attr-defined]
    wait_socket(page)


def _drop(page: Page, name: str, data: bytes, mime: str) -> None:
    page.evaluate(
        """([name, b64, mime]) => {
            const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
            const dt = new DataTransfer();
            dt.items.add(new File([bytes], name, {type: mime}));
            const target = document.querySelector('#messages');
            for (const type of ['dragenter', 'dragover', 'drop']) {
              target.dispatchEvent(new DragEvent(type, {bubbles: true, cancelable: true, dataTransfer: dt}));
            }
        }""",
        [name, base64.b64encode(data).decode(), mime],
    )


def _paste(page: Page, name: str, data: bytes, mime: str) -> None:
    page.focus("#composer-input")
    page.evaluate(
        """([name, b64, mime]) => {
            const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
            const dt = new DataTransfer();
            dt.items.add(new File([bytes], name, {type: mime}));
            document.querySelector('#composer-input').dispatchEvent(
              new ClipboardEvent('paste', {bubbles: true, cancelable: true, clipboardData: dt}));
        }""",
        [name, base64.b64encode(data).decode(), mime],
    )


def _chip(page: Page, name: str) -> Any:
    return page.locator('[data-testid="attach-chip"]', has_text=name)


def test_paperclip_drop_paste_thumbnail_remove_and_send(files_page: Page, tmp_path: Path) -> None:
    page = files_page
    _open_chat(page)
    pdf = tmp_path / "report.pdf"
    pdf.write_bytes(samples.pdf(["Quarterly report. Revenue grew by 12 percent.", "Costs stayed flat."]))
    # The paperclip opens the file picker.
    with page.expect_file_chooser() as chooser:
        page.click('[data-testid="attach-button"]')
    chooser.value.set_files(str(pdf))
    expect(_chip(page, "report.pdf")).to_have_class("file-chip is-ready", timeout=20_000)
    expect(_chip(page, "report.pdf").locator(".file-meta")).to_contain_text("PDF")
    # Drag and drop a CSV onto the chat.
    _drop(page, "numbers.csv", b"region,amount\nNorth,10\nSouth,20\n", "text/csv")
    expect(_chip(page, "numbers.csv")).to_have_class("file-chip is-ready", timeout=20_000)
    # Paste an image: a thumbnail at once, then the server's.
    _paste(page, "image.png", samples.image(size=(240, 160), colour=(40, 90, 220)), "image/png")
    chip = _chip(page, "image.png")
    expect(chip.locator("img.file-thumb")).to_be_visible()
    expect(chip).to_have_class("file-chip is-ready", timeout=20_000)
    page.wait_for_function(
        """() => [...document.querySelectorAll('.file-thumb')]
                 .some((i) => i.src.includes('/thumbnail/') && i.complete && i.naturalWidth > 0)"""
    )
    # Remove the CSV: its chip goes, and so does the stored file.
    from toolsets.files.models import Attachment

    csv_id = Attachment.objects.get(name="numbers.csv").pk
    _chip(page, "numbers.csv").locator('[data-testid="attach-remove"]').click()
    expect(_chip(page, "numbers.csv")).to_have_count(0)
    for _ in range(50):
        if not Attachment.objects.filter(pk=csv_id).exists():
            break
        page.wait_for_timeout(100)
    assert not Attachment.objects.filter(pk=csv_id).exists()
    shot(page, "files-composer-light")
    set_theme(page, "dark")
    shot(page, "files-composer-dark")
    set_theme(page, "light")
    # Send: the message carries both files; the model reads the PDF and describes the image.
    page.fill("#composer-input", "Summarize the attached file")
    page.keyboard.press("Enter")
    page.wait_for_selector('[data-testid="message-files"]')
    expect(page.locator('[data-testid="attach-chip"]')).to_have_count(0)
    wait_turn_done(page, 60_000)
    answer = page.locator(".turn").last
    expect(answer).to_contain_text("report.pdf (pages 1–2 of 2) in short: Quarterly report.")
    expect(answer.locator("sup.cite a")).to_have_count(1)
    source = answer.locator('[data-testid="source"] a').first
    assert (source.get_attribute("href") or "").startswith("/files/")
    live = page.inner_html('[data-testid="message-files"]')
    assert "report.pdf" in live and "image.png" in live and "file-thumb" in live
    shot(page, "files-sent-light")
    set_theme(page, "dark")
    shot(page, "files-sent-dark")
    # The same after a reload.
    page.reload()
    assert page.inner_html('[data-testid="message-files"]') == live
    # Editing the question keeps its files: the new version carries them, and its answer reads
    # the PDF again.
    wait_socket(page)
    question = page.locator(".msg-user").first
    question.get_by_role("button", name="Edit message").click()
    question.get_by_test_id("edit-input").fill("Summarize the attached file again")
    question.get_by_test_id("edit-input").press("Enter")
    expect(page.locator(".msg-user").first.get_by_test_id("version-label")).to_have_text("2 / 2")
    wait_turn_done(page, 60_000)
    expect(page.locator(".turn").last).to_contain_text("report.pdf (pages 1–2 of 2) in short: Quarterly report.")
    assert page.inner_html('[data-testid="message-files"]') == live
    shot(page, "files-edited-version")
    # The chip links to the preview, which shows the text.
    href = page.locator('[data-testid="message-file"] a', has_text="report.pdf").get_attribute("href")
    page.goto(page.base_url + href)  # type: ignore[attr-defined, operator]
    expect(page.locator("#page-2")).to_contain_text("Costs stayed flat.")


def test_progress_bar_moves_while_uploading(files_page: Page, tmp_path: Path) -> None:
    page = files_page
    _open_chat(page)
    big = tmp_path / "big.txt"
    big.write_bytes(b"lorem ipsum dolor sit amet\n" * 120_000)  # about 3 MB
    cdp = page.context.new_cdp_session(page)
    cdp.send("Network.enable")
    cdp.send(
        "Network.emulateNetworkConditions",
        {"offline": False, "latency": 20, "downloadThroughput": -1, "uploadThroughput": 1_000_000},
    )
    page.set_input_files('[data-testid="attach-input"]', str(big))
    bar = _chip(page, "big.txt").locator('[role="progressbar"]')
    page.wait_for_function(
        """() => { const b = document.querySelector('[data-testid="attach-chip"] [role="progressbar"]');
                   const v = b && Number(b.getAttribute('aria-valuenow'));
                   return v > 0 && v < 100; }""",
        timeout=15_000,
    )
    expect(_chip(page, "big.txt").locator(".file-meta")).to_contain_text("Uploading")
    shot(page, "files-progress")
    # Send waits for the upload: the message goes once the file is ready.
    page.fill("#composer-input", "Summarize the attached file")
    page.keyboard.press("Enter")
    expect(page.locator(".msg-user")).to_have_count(0)
    cdp.send(
        "Network.emulateNetworkConditions",
        {"offline": False, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1},
    )
    page.wait_for_selector('[data-testid="message-files"]', timeout=30_000)
    assert bar.count() == 0
    wait_turn_done(page, 60_000)


def test_refused_files_say_why_and_block_send_until_removed(files_page: Page) -> None:
    page = files_page
    _open_chat(page)
    _drop(
        page,
        "tool.exe",
        b"MZ\x90\x00\x03\x00\x00\x00\x04\x00\x00\x00\xff\xff" + b"\x00" * 200,
        "application/octet-stream",
    )
    chip = _chip(page, "tool.exe")
    expect(chip).to_have_class("file-chip is-failed", timeout=10_000)
    expect(chip.locator(".file-meta")).to_contain_text("files are not supported")
    _drop(page, "empty.txt", b"", "text/plain")
    expect(_chip(page, "empty.txt").locator(".file-meta")).to_have_text("The file is empty.")
    # A file the worker cannot read fails after upload, on its chip.
    _drop(page, "latin.txt", b"caf\xe9 au lait", "text/plain")
    expect(_chip(page, "latin.txt")).to_have_class("file-chip is-failed", timeout=20_000)
    expect(_chip(page, "latin.txt").locator(".file-meta")).to_contain_text("not valid UTF-8")
    page.fill("#composer-input", "hello")
    page.keyboard.press("Enter")
    expect(page.locator("#composer-error")).to_contain_text("before sending")
    expect(page.locator(".msg-user")).to_have_count(0)
    assert page.input_value("#composer-input") == "hello"  # nothing typed is lost
    shot(page, "files-refused")
    for name in ("tool.exe", "empty.txt", "latin.txt"):
        _chip(page, name).locator('[data-testid="attach-remove"]').click()
    page.keyboard.press("Enter")
    page.wait_for_selector(".msg-user")
    wait_turn_done(page)


def test_phone_layout_and_axe(browser: Browser, stack: Any, e2e_user: Any, tmp_path: Path) -> None:
    with browser_page(browser, stack.url, bypass_csp=True, allow_console=REFUSED_UPLOAD) as page:
        _open_chat(page)
        image = tmp_path / "photo.png"
        image.write_bytes(samples.image(size=(300, 200), colour=(220, 40, 40)))
        page.set_input_files('[data-testid="attach-input"]', [str(image)])
        _drop(page, "notes.md", b"# Notes\n\n- one\n- two\n", "text/markdown")
        _drop(
            page,
            "tool.exe",
            b"MZ\x90\x00\x03\x00\x00\x00\x04\x00\x00\x00\xff\xff" + b"\x00" * 200,
            "application/octet-stream",
        )
        expect(_chip(page, "photo.png")).to_have_class("file-chip is-ready", timeout=20_000)
        expect(_chip(page, "notes.md")).to_have_class("file-chip is-ready", timeout=20_000)
        expect(_chip(page, "tool.exe")).to_have_class("file-chip is-failed", timeout=10_000)
        failures = []
        for theme in ("light", "dark"):
            set_theme(page, theme)
            found = blocking(axe_violations(page))
            if found:
                failures.append(describe(found, f"composer with files, {theme}"))
        _chip(page, "tool.exe").locator('[data-testid="attach-remove"]').click()
        page.fill("#composer-input", "What's in this image?")
        page.keyboard.press("Enter")
        wait_turn_done(page, 60_000)
        expect(page.locator(".turn").last).to_contain_text("a 300×200 PNG image; its dominant colour is red")
        for theme in ("light", "dark"):
            set_theme(page, theme)
            found = blocking(axe_violations(page))
            if found:
                failures.append(describe(found, f"sent files, {theme}"))
        href = page.locator('[data-testid="message-file"] a', has_text="notes.md").get_attribute("href")
        chat_url = page.url
        page.goto(page.base_url + href)  # type: ignore[attr-defined, operator]
        for theme in ("light", "dark"):
            set_theme(page, theme)
            found = blocking(axe_violations(page))
            if found:
                failures.append(describe(found, f"file preview, {theme}"))
            shot(page, f"files-preview-{theme}")
        assert not failures, "\n".join(failures)
        page.set_viewport_size({"width": 390, "height": 800})
        page.goto(chat_url)
        set_theme(page, "light")
        page.wait_for_selector('[data-testid="message-files"]')
        shot(page, "files-phone-sent")
        page.set_input_files('[data-testid="attach-input"]', [str(image)])
        expect(_chip(page, "photo.png")).to_have_class("file-chip is-ready", timeout=20_000)
        shot(page, "files-phone")
