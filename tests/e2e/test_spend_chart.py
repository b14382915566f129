"""Spend over time in admin, in a real browser against the stack: from the Spend list to the
chart, split and filtered with the form; the chart, its legend and its table agree; axe finds
nothing serious in either theme or on a phone; a bad period is refused with the reason."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.contrib.auth.models import Group
from playwright.sync_api import Browser, expect

from chat.models import Spend
from tests.e2e.axe import axe_violations, blocking, describe, set_theme
from tests.e2e.conftest import PASSWORD, shot

pytestmark = pytest.mark.e2e


def make_ledger(first: Any) -> None:
    """Forty-five days of spending by four people in two groups, on three models."""
    from django.contrib.auth import get_user_model

    research = Group.objects.create(name="Research")
    support = Group.objects.create(name="Support")
    first.groups.add(research)
    people = [first]
    for name, group in (("bea", research), ("carl", support), ("dora", support)):
        person = get_user_model().objects.create_user(name, password=PASSWORD)
        person.groups.add(group)
        people.append(person)
    today = datetime.now(UTC).replace(hour=12, minute=0, second=0, microsecond=0)
    models = ["openai/gpt-4o", "anthropic/claude-sonnet-4-5", "demo/tessera"]
    for day in range(45):
        for n, person in enumerate(people):
            if (2 * day + n) % 5 == 0:
                continue
            model = models[(day + n) % len(models)]
            cost = "0" if model == "demo/tessera" else f"{0.4 + 0.15 * n + (day % 7) * 0.05:.2f}"
            row = Spend.objects.create(
                user=person, model_name=model, prompt_tokens=3000 + 100 * day, completion_tokens=800, cost=cost
            )
            Spend.objects.filter(pk=row.pk).update(created_at=today - timedelta(days=day))


@pytest.fixture
def ledger(transactional_db: Any, e2e_user: Any) -> None:
    from django.contrib.auth import get_user_model

    get_user_model().objects.create_superuser("grace", password=PASSWORD)
    make_ledger(e2e_user)


def test_admin_sees_spend_over_time_as_charts(browser: Browser, stack: Any, ledger: None) -> None:
    context = browser.new_context(viewport={"width": 1280, "height": 900}, bypass_csp=True)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(f"{stack.url}/admin/login/?next=/admin/chat/spend/")
    page.fill("#id_username", "grace")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url(f"{stack.url}/admin/chat/spend/")

    page.get_by_test_id("spend-chart-link").click()
    page.wait_for_url(f"{stack.url}/admin/chat/spend/chart/")
    chart = page.get_by_test_id("spend-chart")
    expect(chart).to_be_visible()
    expect(page.get_by_role("img", name="Cost in USD per day, by user")).to_be_visible()
    legend = page.get_by_test_id("spend-chart-legend")
    for name in ("ada", "bea", "carl", "dora"):
        expect(legend).to_contain_text(name)
    # Thirty days: a row per day in the table.
    expect(page.get_by_test_id("spend-chart-table").locator("tbody tr")).to_have_count(30)
    assert page.locator('[data-testid="spend-bar"]').count() > 30
    shot(page, "admin-spend-chart-users", full_page=True)

    # Per group and month, tokens, for the last three months.
    page.select_option("#id_by", "group")
    page.select_option("#id_granularity", "month")
    page.select_option("#id_metric", "tokens")
    start = (datetime.now(UTC) - timedelta(days=60)).date().replace(day=1)
    page.fill("#id_start", start.isoformat())
    page.get_by_test_id("spend-chart-apply").click()
    expect(page.get_by_role("img", name="Tokens per month, by group")).to_be_visible()
    table = page.get_by_test_id("spend-chart-table")
    # The series, biggest first.
    assert sorted([t.strip() for t in table.locator("thead th").all_text_contents()[1:3]]) == ["Research", "Support"]
    expect(table.locator("thead th")).to_have_count(4)
    expect(table.locator("tbody tr")).to_have_count(3)
    # The table's total is the ledger's.
    ledger_tokens = sum(
        row.prompt_tokens + row.completion_tokens for row in Spend.objects.filter(created_at__date__gte=start)
    )
    expect(table.locator("tfoot td").last).to_have_text(f"{ledger_tokens:,}")
    shot(page, "admin-spend-chart-groups", full_page=True)

    # One model only, per user.
    page.select_option("#id_by", "user")
    print(
        "OPTIONS",
        page.locator("#id_model option").all_text_contents(),
        page.locator("#id_model").evaluate("e => e.outerHTML"),
    )
    page.select_option("#id_model", "openai/gpt-4o")
    page.get_by_test_id("spend-chart-apply").click()
    expect(page.get_by_role("img", name="Tokens per month, by user")).to_be_visible()

    failures = []
    for theme in ("light", "dark"):
        set_theme(page, theme)
        found = blocking(axe_violations(page))
        if found:
            failures.append(describe(found, f"spend chart, {theme}"))
        shot(page, f"admin-spend-chart-{theme}", full_page=True)
    page.set_viewport_size({"width": 390, "height": 844})
    set_theme(page, "light")
    found = blocking(axe_violations(page))
    if found:
        failures.append(describe(found, "spend chart, phone"))
    shot(page, "admin-spend-chart-phone", full_page=True)

    # A bad period: the reason, and no chart.
    page.set_viewport_size({"width": 1280, "height": 900})
    page.fill("#id_start", "2026-12-31")
    page.fill("#id_end", "2026-01-01")
    page.get_by_test_id("spend-chart-apply").click()
    expect(page.get_by_test_id("spend-chart-error")).to_contain_text("“From” must not be after “To”.")
    expect(page.get_by_test_id("spend-chart")).to_have_count(0)
    context.close()
    assert not failures, "\n".join(failures)
    assert not errors
