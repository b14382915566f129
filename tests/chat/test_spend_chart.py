"""Spend over time in admin (chat/spend/chart.py): sums per day or month (UTC), split per user,
group or model, filtered, drawn as SVG with a table of the same numbers; bad filters are 400s."""

from __future__ import annotations

import csv
import io
import re
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.test import Client

from chat.models import Spend
from chat.spend import chart as spend_chart

pytestmark = pytest.mark.django_db

URL = "/admin/chat/spend/chart/"


def spend(user: Any, when: datetime, model: str, cost: str, tokens: int = 100) -> Spend:
    row = Spend.objects.create(user=user, model_name=model, prompt_tokens=tokens, completion_tokens=0, cost=cost)
    Spend.objects.filter(pk=row.pk).update(created_at=when)
    return row


@pytest.fixture
def ledger(user: Any, other_user: Any) -> dict[str, Any]:
    staff = Group.objects.create(name="staff")
    sales = Group.objects.create(name="sales")
    user.groups.add(staff, sales)
    other_user.groups.add(sales)
    spend(user, datetime(2026, 10, 31, 23, 59, tzinfo=UTC), "openai/gpt-4o", "1.00")
    spend(user, datetime(2026, 11, 1, 0, 1, tzinfo=UTC), "openai/gpt-4o", "2.00")
    spend(user, datetime(2026, 11, 1, 12, 0, tzinfo=UTC), "demo/tessera", "0", tokens=5000)
    spend(other_user, datetime(2026, 11, 3, 9, 0, tzinfo=UTC), "openai/gpt-4o", "0.50")
    return {"staff": staff, "sales": sales}


def admin_client() -> Client:
    root = get_user_model().objects.create_superuser("root", password="x" * 20)
    client = Client()
    client.force_login(root)
    return client


def chart(**query: Any) -> spend_chart.Chart:
    form = spend_chart.ChartForm(query)
    assert form.is_valid(), form.errors
    return spend_chart.build(form.cleaned_data)


def values(c: spend_chart.Chart) -> dict[str, list[Decimal]]:
    return {s.name: s.values for s in c.series}


def test_days_in_utc_split_per_user(user: Any, ledger: dict[str, Any]) -> None:
    c = chart(by="user", granularity="day", start="2026-10-31", end="2026-11-03")
    assert c.labels == ["31 Oct 2026", "1 Nov 2026", "2 Nov 2026", "3 Nov 2026"]
    assert values(c) == {
        "alice": [Decimal("1.00"), Decimal("2.00"), 0, 0],
        "mallory": [0, 0, 0, Decimal("0.50")],
    }
    assert c.totals == [Decimal("1.00"), Decimal("2.00"), 0, Decimal("0.50")]
    assert c.grand_total == Decimal("3.50")
    # One bar per non-zero value; the tallest day reaches the top grid line's height or below it.
    assert len(c.bars) == 3 and all(bar.height > 0 for bar in c.bars)
    assert "alice" in c.summary and "$3.50 in all" in c.summary


def test_months_per_group_count_a_call_in_each_of_the_users_groups(user: Any, ledger: dict[str, Any]) -> None:
    c = chart(by="group", granularity="month", start="2026-10-01", end="2026-11-30")
    assert c.labels == ["October 2026", "November 2026"]
    assert values(c) == {
        "sales": [Decimal("1.00"), Decimal("2.50")],
        "staff": [Decimal("1.00"), Decimal("2.00")],
    }


def test_tokens_per_model_and_filters(user: Any, other_user: Any, ledger: dict[str, Any]) -> None:
    c = chart(by="model", metric="tokens", granularity="month", start="2026-11-01", end="2026-11-30")
    assert values(c) == {"demo/tessera": [5000], "openai/gpt-4o": [200]}
    only_bob = chart(by="model", granularity="month", start="2026-11-01", end="2026-11-30", user=other_user.pk)
    assert values(only_bob) == {"openai/gpt-4o": [Decimal("0.50")]}
    staff = chart(by="group", granularity="month", start="2026-11-01", end="2026-11-30", group=ledger["staff"].pk)
    assert values(staff) == {"staff": [Decimal("2.00")]}  # not the members' other groups
    one_model = chart(by="user", granularity="day", start="2026-11-01", end="2026-11-01", model="demo/tessera")
    assert values(one_model) == {"alice": [Decimal("0")]} or one_model.empty


def test_more_users_than_colours_are_summed_as_others(db: Any) -> None:
    users = [get_user_model().objects.create_user(f"u{n:02d}") for n in range(11)]
    for n, u in enumerate(users):
        spend(u, datetime(2026, 11, 2, tzinfo=UTC), "m", str(n + 1))
    c = chart(by="user", start="2026-11-02", end="2026-11-02")
    assert len(c.series) == spend_chart.MAX_SERIES + 1
    assert c.series[0].name == "u10" and c.series[-1].name == "Others (3)"
    assert c.series[-1].values == [Decimal(1 + 2 + 3)]
    assert c.grand_total == sum(Decimal(n + 1) for n in range(11))


def test_the_page_draws_the_chart_and_the_table(user: Any, ledger: dict[str, Any]) -> None:
    response = admin_client().get(URL, {"by": "user", "start": "2026-10-31", "end": "2026-11-03"})
    html = response.content.decode()
    assert response.status_code == 200
    assert 'role="img"' in html and 'aria-labelledby="spend-chart-title spend-chart-desc"' in html
    assert html.count('data-testid="spend-bar"') == 3
    assert "<title>1 Nov 2026, alice: $2.00</title>" in html
    table = html.split('data-testid="spend-chart-table"', 1)[1]
    assert re.search(r"<th scope=\"row\">3 Nov 2026</th><td>\$0.00</td><td>\$0.50</td><td>\$0.50</td>", table)


def test_the_default_is_the_last_thirty_days_per_user(user: Any) -> None:
    spend(user, datetime.now(UTC), "m", "0.25")
    response = admin_client().get(URL)
    assert response.status_code == 200
    c = response.context["chart"]
    assert (c.by, c.granularity, len(c.labels)) == ("user", "day", 30) and c.grand_total == Decimal("0.25")


def test_csv_of_the_charts_numbers(user: Any, ledger: dict[str, Any]) -> None:
    Group.objects.filter(name="sales").update(name="=cmd()")
    response = admin_client().get(URL, {"by": "group", "granularity": "month", "start": "2026-11-01", "format": "csv"})
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    rows = list(csv.reader(io.StringIO(response.content.decode())))
    assert rows[0][0] == "month" and "'=cmd()" in rows[0] and rows[0][-1] == "total (USD)"


@pytest.mark.parametrize(
    "query",
    [
        {"by": "nobody"},
        {"by": "user", "granularity": "week"},
        {"by": "user", "start": "2026-11-05", "end": "2026-11-01"},
        {"by": "user", "start": "2020-01-01", "end": "2026-01-01"},
        {"by": "user", "granularity": "month", "start": "1900-01-01", "end": "2026-01-01"},
        {"by": "user", "start": "not a date"},
        {"by": "user", "start": "99999-01-01"},
        {"by": "user", "user": "999999999999999999999"},
        {"by": "user", "group": "x"},
        {"by": "user", "model": "<script>alert(1)</script>"},
        {"by": "user", "metric": "dollars"},
        {"by": "user", "start": "9999-12-01", "end": "9999-12-31"},
        {"by": "user", "granularity": "month", "end": "0001-01-31"},
        {"by": "user", "end": "0001-01-01"},
    ],
)
def test_bad_filters_are_a_400_with_the_reason(db: Any, query: dict[str, str]) -> None:
    response = admin_client().get(URL, query)
    assert response.status_code == 400
    html = response.content.decode()
    assert 'role="alert"' in html and 'data-testid="spend-chart"' not in html
    assert "<script>alert(1)</script>" not in html


def test_only_admins_who_may_view_spend_see_it(user: Any, ledger: dict[str, Any]) -> None:
    client = Client()
    client.force_login(user)
    assert client.get(URL).status_code == 302  # not staff: admin's sign-in
    user.is_staff = True
    user.save()
    assert client.get(URL).status_code == 403
    user.user_permissions.add(Permission.objects.get(codename="view_spend"))
    assert client.get(URL).status_code == 200


def test_names_are_text_in_the_chart(db: Any) -> None:
    hostile = get_user_model().objects.create_user('<img src=x onerror="alert(1)">')
    spend(hostile, datetime(2026, 11, 2, tzinfo=UTC), "<script>alert(2)</script>", "1")
    html = admin_client().get(URL, {"by": "model", "start": "2026-11-02", "end": "2026-11-02"}).content.decode()
    assert "<script>alert(2)" not in html and "&lt;script&gt;alert(2)&lt;/script&gt;" in html
    html = admin_client_2().get(URL, {"by": "user", "start": "2026-11-02", "end": "2026-11-02"}).content.decode()
    assert "<img src=x" not in html


def admin_client_2() -> Client:
    root = get_user_model().objects.create_superuser("root2", password="x" * 20)
    client = Client()
    client.force_login(root)
    return client


def test_month_start_defaults_to_twelve_months(db: Any) -> None:
    assert spend_chart._default_start("month", date(2026, 11, 25)) == date(2025, 12, 1)
    assert spend_chart._default_start("month", date(2026, 1, 3)) == date(2025, 2, 1)


def test_spending_of_people_in_no_group_has_its_own_bar(user: Any) -> None:
    spend(user, datetime(2026, 11, 2, tzinfo=UTC), "m", "0.75")
    c = chart(by="group", start="2026-11-02", end="2026-11-02")
    assert values(c) == {spend_chart.NO_GROUP: [Decimal("0.75")]}
