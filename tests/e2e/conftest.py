from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from playwright.sync_api import Browser, Frame, Page, sync_playwright

# Chromium's headless shell (Debian's chromium-headless-shell: the same Chromium build as
# /usr/bin/chromium, its Blink and V8, in the headless mode Playwright itself runs by default).
# The full browser's headless mode opens a whole browser window for every context: on this
# project's suite that was 0.7 s of CPU per test more and a third more per page load
# (docs/development.md). TESSERA_TEST_CHROMIUM=/usr/bin/chromium runs the suite in the full one.
CHROMIUM = os.environ.get("TESSERA_TEST_CHROMIUM") or "/usr/bin/chromium-headless-shell"
PASSWORD = "a long test passphrase"

# A `wait_for_function` predicate is polled every 100 ms here, not on every animation frame
# (Playwright's default): a frame-polled wait keeps the page producing frames at 60 Hz for as long
# as it lasts, ten times the browser's CPU of an interval (0.07 s of CPU a second of waiting
# against 0.006 on a plain page), and the suite's tests wait on answers for many minutes in all.
WAIT_POLL_MS = 100
for _owner in (Page, Frame):
    _original = _owner.wait_for_function

    def _polled(self: Any, expression: str, *, polling: Any = WAIT_POLL_MS, _wait: Any = _original, **kw: Any) -> Any:
        return _wait(self, expression, polling=polling, **kw)

    _owner.wait_for_function = _polled  # type: ignore[method-assign]
SHOTS = Path(settings.VAR_DIR) / "screenshots"


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    # One browser a module, not a session: Playwright's sync API keeps an event loop running in
    # the main thread while it is open, which the async tests that a parallel worker runs next
    # (tests/conftest.py's xdist set-up) cannot share. A session browser was tried: xdist hands
    # a worker ordinary modules after browser ones, and 219 async tests failed.
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
            ],
        )
        yield browser
        browser.close()


@pytest.fixture
def e2e_user(transactional_db: Any, demo_model: Any) -> Any:
    from django.contrib.auth import get_user_model

    return get_user_model().objects.create_user("ada", password=PASSWORD)


def login(page: Page, base_url: str, username: str = "ada") -> None:
    page.goto(f"{base_url}/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{base_url}/")


def sign_in(page: Page, base_url: str, username: str = "ada") -> None:
    """Signed in as the sign-in form would leave the browser, without loading and posting the
    form: a session made here, its cookie given to the browser, then the page the form lands on.
    The form itself is tested by tests/e2e/test_accounts.py and by the tests that call `login`."""
    from django.contrib.auth import get_user_model
    from django.test import Client

    client = Client()
    client.force_login(get_user_model().objects.get(username=username))
    cookie = client.cookies[settings.SESSION_COOKIE_NAME]
    page.context.add_cookies([{"name": cookie.key, "value": cookie.value, "url": base_url}])
    page.goto(f"{base_url}/")


@contextmanager
def browser_page(
    browser: Browser,
    base_url: str,
    *,
    signed_in: bool = True,
    bypass_csp: bool = False,
    allow_console: tuple[str, ...] = (),
    **options: Any,
) -> Iterator[Page]:
    """A page in a fresh browser context on the stack, signed in as ada unless `signed_in` is
    False. `bypass_csp` lets axe (an injected script) run despite the page's Content-Security-
    Policy; the page's own scripts are what they always are. A page error, or a console error
    not starting with one of `allow_console`, fails the test."""
    context = browser.new_context(**{"viewport": {"width": 1280, "height": 860}, **options}, bypass_csp=bypass_csp)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))

    def console(msg: Any) -> None:
        if msg.type == "error" and not msg.text.startswith(allow_console):
            errors.append(msg.text)

    page.on("console", console)
    page.base_url = base_url  # type: ignore[attr-defined]
    if signed_in:
        sign_in(page, base_url)
    yield page
    context.close()
    assert not errors, f"browser errors: {errors}"


@pytest.fixture
def page(browser: Browser, stack: Any, e2e_user: Any) -> Iterator[Page]:
    with browser_page(browser, stack.url) as found:
        yield found


@pytest.fixture
def axe_page(browser: Browser, stack: Any, e2e_user: Any) -> Iterator[Page]:
    """Signed out, with the page's CSP bypassed so axe can be injected."""
    with browser_page(browser, stack.url, signed_in=False, bypass_csp=True) as found:
        yield found


@pytest.fixture
def axe_signed_in(browser: Browser, stack: Any, e2e_user: Any) -> Iterator[Page]:
    """Signed in as ada, with the page's CSP bypassed so axe can be injected."""
    with browser_page(browser, stack.url, bypass_csp=True) as found:
        yield found


def send(page: Page, text: str) -> None:
    page.fill("#composer-input", text)
    page.keyboard.press("Enter")


def send_and_wait(page: Page, text: str, timeout: float = 30_000) -> None:
    """Sends in an open chat and waits until that new turn has finished."""
    before = page.locator(".turn").count()
    send(page, text)
    page.wait_for_function(f"() => document.querySelectorAll('.turn').length > {before}", timeout=10_000)
    wait_turn_done(page, timeout)


def wait_socket(page: Page) -> None:
    page.wait_for_selector('body[data-ws="open"]', timeout=15_000)


def turn_status(page: Page) -> str:
    return page.locator(".turn-state").last.get_attribute("data-turn-status") or ""


def wait_turn_done(page: Page, timeout: float = 30_000) -> None:
    page.wait_for_function(
        """() => { const s = [...document.querySelectorAll('.turn-state')].pop();
                   return s && !['queued', 'running'].includes(s.dataset.turnStatus); }""",
        timeout=timeout,
    )


def normalized_messages(page: Page) -> str:
    """#messages without what legitimately differs between a live page and a fresh load:
    the sequence counter, htmx's transient settle classes, and the mark a fresh load puts on the
    exchanges above the last two (laid out only near the window, static/css/app.css)."""
    html = page.inner_html("#messages")
    html = re.sub(r' data-seq="\d+"', "", html)
    html = html.replace('class="turn turn-lazy"', 'class="turn"')
    html = re.sub(r"\s*htmx-(added|settling|swapping|request)", "", html)
    html = re.sub(r' class=""', "", html)
    # A screenshot hides the caret of editable fields through their inline style, and leaves
    # an empty one behind (the edit box of a question is such a field).
    html = re.sub(r' style=""', "", html)
    return re.sub(r">\s+<", "><", html).strip()


def shot(page: Page, name: str, full_page: bool = False) -> Path:
    SHOTS.mkdir(parents=True, exist_ok=True)
    path = SHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=full_page)
    return path
