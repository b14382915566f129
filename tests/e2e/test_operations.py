"""Operations in the browser: the staff overview (axe, both themes, a phone), and a chat page
that reconnects by itself when its web process restarts."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.utils import timezone
from playwright.sync_api import Browser, Page, expect

from chat.models import Chat, LLMModel, Message, Turn
from tests.e2e.axe import axe_violations, blocking, describe, set_theme
from tests.e2e.conftest import PASSWORD, login, send_and_wait, shot, wait_socket
from tests.processes import Processes, free_port
from toolsets.models import ToolExecution


@pytest.fixture
def staff(transactional_db: Any) -> Any:
    from django.contrib.auth import get_user_model

    return get_user_model().objects.create_user("grace", password=PASSWORD, is_staff=True)


def _activity(owner: Any, model: LLMModel) -> None:
    """A day of traffic: turns of every outcome, tokens, and tools that are slow or fail."""
    chat = Chat.objects.create(owner=owner, model=model, title="Busy chat")
    statuses = [Turn.Status.COMPLETED] * 6 + [Turn.Status.FAILED] * 2 + [Turn.Status.CANCELLED, Turn.Status.INTERRUPTED]
    for i, status in enumerate(statuses):
        turn = Turn.objects.create(chat=chat, model=model, status=status)
        Message.objects.create(
            chat=chat, turn=turn, role=Message.Role.ASSISTANT, prompt_tokens=1200 + i, completion_tokens=340 + i
        )
        for tool, ms, ok in (("calculate", 4, True), ("current_time", 12, True), ("fetch_page", 2400, i % 3 != 0)):
            ToolExecution.objects.create(
                user=owner,
                turn=turn,
                toolset="web" if tool == "fetch_page" else "clock_math",
                tool=tool,
                tool_call_id=f"call-{i}-{tool}",
                status="success" if ok else "error",
                error_type="" if ok else "timeout_error",
                duration_ms=ms + i,
                finished_at=timezone.now(),
            )
    # Older than a day: not counted.
    old = Turn.objects.create(chat=chat, model=model, status=Turn.Status.FAILED)
    Turn.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(days=2))


def test_staff_overview_passes_axe_and_reads_well(browser: Browser, stack: Any, staff: Any, e2e_user: Any) -> None:
    model = LLMModel.objects.get(model="demo/tessera")
    _activity(e2e_user, model)
    context = browser.new_context(viewport={"width": 1280, "height": 900}, bypass_csp=True)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(f"{stack.url}/admin/login/?next=/admin/overview/")
    page.fill("#id_username", "grace")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url(f"{stack.url}/admin/overview/")

    expect(page.get_by_role("heading", name="Turns by outcome")).to_be_visible()
    tiles = page.locator(".ops-tiles li")
    expect(tiles.filter(has_text="Completed").locator(".value")).to_have_text("6")
    expect(tiles.filter(has_text="Failed").locator(".value")).to_have_text("2")
    expect(tiles.filter(has_text="Interrupted").locator(".value")).to_have_text("1")
    expect(page.locator("#ops-tokens + table tbody tr").first).to_contain_text("ada")
    expect(page.locator("#ops-slow + table tbody tr").first).to_contain_text("web.fetch_page")
    expect(page.locator("#ops-failing + table tbody tr").first).to_contain_text("timeout_error")
    # The stack's worker beats: at least one alive.
    expect(page.locator("#ops-workers")).not_to_have_text("Workers alive: 0")

    failures = []
    for theme in ("light", "dark"):
        set_theme(page, theme)
        found = blocking(axe_violations(page))
        if found:
            failures.append(describe(found, f"overview, {theme}"))
        shot(page, f"ops-overview-{theme}", full_page=True)
    page.set_viewport_size({"width": 390, "height": 844})
    set_theme(page, "light")
    shot(page, "ops-overview-phone", full_page=True)
    found = blocking(axe_violations(page))
    if found:
        failures.append(describe(found, "overview, phone"))
    context.close()
    assert not failures, "\n".join(failures)
    assert not errors


def test_overview_is_for_staff_only(page: Page) -> None:
    page.goto(page.base_url + "/admin/overview/")  # type: ignore[attr-defined]
    # A signed-in user who is not staff gets the admin's sign-in page, not the figures.
    expect(page.locator("#ops-turns")).to_have_count(0)
    expect(page.locator("#login-form")).to_be_visible()


@pytest.fixture
def web_of_our_own(tmp_path: Path, stack: Any) -> Iterator[tuple[Processes, int]]:
    """A web process on the session's Redis and database (the stack's worker runs its turns)
    that the test can stop and start again on the same port."""
    processes = Processes(tmp_path, redis_url=settings.REDIS_URL)
    processes.env["PROMETHEUS_MULTIPROC_DIR"] = stack.env.get("PROMETHEUS_MULTIPROC_DIR", str(tmp_path / "metrics"))
    yield processes, free_port()
    processes.close()


def test_page_reconnects_when_its_web_process_restarts(
    browser: Browser, web_of_our_own: tuple[Processes, int], e2e_user: Any
) -> None:
    processes, port = web_of_our_own
    base = f"http://127.0.0.1:{port}"
    web = processes.web(port)
    context = browser.new_context(viewport={"width": 1280, "height": 860})
    page = context.new_page()
    login(page, base)
    send_and_wait(page, "What is 6*7?")
    wait_socket(page)
    page.evaluate(
        """() => document.addEventListener("htmx:wsClose", (e) => {
            window.closeCodes = (window.closeCodes || []).concat(e.detail.event.code);
        })"""
    )

    web.send_signal(signal.SIGTERM)
    assert web.wait(timeout=15) == 0
    page.wait_for_selector('body[data-ws="reconnecting"]', timeout=10_000)
    assert page.evaluate("window.closeCodes")[0] == 1012
    shot(page, "ops-reconnecting")

    processes.web(port, name="web-again")
    wait_socket(page)
    # The same page, reconnected, streams the next answer.
    send_and_wait(page, "What is 7*8?")
    expect(page.locator(".turn").last).to_contain_text("56")
    context.close()
