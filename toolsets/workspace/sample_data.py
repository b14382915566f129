"""Believable sample data for one user, laid out relative to "now" so it never goes out of date:
tasks that are stale or overdue, a calendar for the current week, a fresh inbox, yesterday's
meeting with its action items."""

from __future__ import annotations

import functools
from datetime import date, datetime, time, timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.db import DEFAULT_DB_ALIAS, connection, transaction
from django.utils import timezone

from .models import CalendarEvent, Email, Meeting, Project, SocialPost, Task

OWNED_MODELS = (Project, Task, CalendarEvent, Email, Meeting, SocialPost)


def has_data(user_id: int) -> bool:
    # One query, not one per table: this runs for every turn and every page that shows the tools
    # popover. Its SQL is built once per database: compiling a six-table UNION through the ORM
    # cost more than running it.
    sql, params = _has_data_sql(connection.vendor)
    with connection.cursor() as cursor:
        cursor.execute(sql, [user_id if p == _ANY_USER else p for p in params])
        return cursor.fetchone() is not None


_ANY_USER = -7_361_919  # stands for the user id in the SQL built once; never a real id


@functools.cache
def _has_data_sql(vendor: str) -> tuple[str, tuple[Any, ...]]:
    first, *rest = (model.objects.filter(user_id=_ANY_USER).values("user_id") for model in OWNED_MODELS)
    query = first.union(*rest).query.exists()
    sql, params = query.get_compiler(DEFAULT_DB_ALIAS).as_sql()
    return sql, tuple(params)


def seed_for_user(user: Any, now: datetime | None = None) -> bool:
    """Creates the user's sample workspace; does nothing and returns False if they have any
    workspace data already."""
    now = now or timezone.now()
    with transaction.atomic():
        # Locks the user row so that two concurrent "Create sample data" clicks seed once.
        get_user_model().objects.select_for_update().filter(pk=user.pk).first()
        if has_data(user.pk):
            return False
        me = user.get_full_name() or user.get_username()
        projects = _projects(user, now)
        _tasks(user, projects, now, me)
        _events(user, now, me)
        _emails(user, now)
        _meetings(user, now, me)
        _posts(user, now)
    return True


def _at(day: date, hour: int, minute: int = 0) -> datetime:
    return timezone.make_aware(datetime.combine(day, time(hour, minute)))


def _projects(user: Any, now: datetime) -> dict[str, Project]:
    rows = [
        ("Website relaunch", "New marketing site on the headless CMS, live before the autumn campaign.", 60),
        ("Mobile app 2.0", "Offline mode, a new onboarding flow and the Android 14 fixes.", 45),
        ("Q3 marketing", "Campaign brief, webinar series and the July newsletter.", 30),
    ]
    return {
        name: Project.objects.create(
            user=user, name=name, description=description, created_at=now - timedelta(days=age)
        )
        for name, description, age in rows
    }


def _tasks(user: Any, projects: dict[str, Project], now: datetime, me: str) -> None:
    today = timezone.localdate(now)
    S, P = Task.Status, Task.Priority
    # (project, name, status, priority, due in days or None, assignee, last updated days ago)
    rows = [
        ("Website relaunch", "Finalize homepage copy", S.IN_PROGRESS, P.HIGH, 2, "Priya Natarajan", 1),
        ("Website relaunch", "Migrate blog posts to the new CMS", S.TODO, P.MEDIUM, 10, "Marco Rossi", 12),
        ("Website relaunch", "Set up redirects for old URLs", S.BLOCKED, P.HIGH, -2, "Marco Rossi", 9),
        ("Website relaunch", "Accessibility audit of key pages", S.TODO, P.URGENT, -1, me, 3),
        ("Website relaunch", "Choose hero photography", S.DONE, P.LOW, -5, "Priya Natarajan", 6),
        ("Mobile app 2.0", "Offline mode for the task list", S.IN_PROGRESS, P.URGENT, 5, "Sam Okafor", 0),
        ("Mobile app 2.0", "Fix crash on Android 14 login", S.TODO, P.URGENT, -3, "Sam Okafor", 15),
        ("Mobile app 2.0", "Push notification settings screen", S.TODO, P.MEDIUM, 14, "Lena Fischer", 20),
        ("Mobile app 2.0", "App Store screenshots", S.TODO, P.LOW, None, "Jordan Lee", 2),
        ("Mobile app 2.0", "Triage beta feedback", S.DONE, P.MEDIUM, -4, "Lena Fischer", 8),
        ("Q3 marketing", "Draft the Q3 campaign brief", S.IN_PROGRESS, P.HIGH, 3, me, 1),
        ("Q3 marketing", "Book webinar speakers", S.BLOCKED, P.MEDIUM, 7, "Alex Kim", 11),
        ("Q3 marketing", "Newsletter: July edition", S.TODO, P.MEDIUM, 12, me, 4),
        ("Q3 marketing", "Competitor pricing review", S.TODO, P.LOW, -6, "Jordan Lee", 30),
    ]
    Task.objects.bulk_create(
        Task(
            user=user,
            project=projects[project],
            name=name,
            status=status,
            priority=priority,
            due_date=today + timedelta(days=due) if due is not None else None,
            assignee=assignee,
            updated_at=now - timedelta(days=age, hours=2),
            created_at=now - timedelta(days=age + 10, hours=5),
        )
        for project, name, status, priority, due, assignee, age in rows
    )


def _events(user: Any, now: datetime, me: str) -> None:
    today = timezone.localdate(now)
    monday = today - timedelta(days=today.weekday())
    # (day, start hour, minute, minutes long, title, attendees, location)
    rows = [
        (monday, 10, 0, 60, "Sprint planning", [me, "Sam Okafor", "Lena Fischer", "Jordan Lee"], "Room Atlas"),
        (monday + timedelta(days=1), 11, 0, 30, "1:1 with Priya", [me, "Priya Natarajan"], "Video call"),
        (monday + timedelta(days=2), 14, 0, 60, "Homepage design review", [me, "Priya Natarajan", "Marco Rossi"], ""),
        (monday + timedelta(days=3), 16, 0, 45, "Acme Corp check-in", [me, "Dana Whitfield"], "Video call"),
        (monday + timedelta(days=4), 15, 0, 60, "Mobile beta demo", [me, "Sam Okafor", "Lena Fischer"], "Room Orbit"),
        (today, 9, 30, 15, "Daily stand-up", [me, "Sam Okafor", "Priya Natarajan", "Marco Rossi"], "Video call"),
        (today, 13, 0, 60, "Lunch with Alex", [me, "Alex Kim"], "Café Lumen"),
    ]
    CalendarEvent.objects.bulk_create(
        CalendarEvent(
            user=user,
            title=title,
            start=_at(day, hour, minute),
            end=_at(day, hour, minute) + timedelta(minutes=minutes),
            attendees=attendees,
            location=location,
        )
        for day, hour, minute, minutes, title, attendees, location in rows
    )


def _emails(user: Any, now: datetime) -> None:
    # (name, address, subject, body, received hours ago, unread)
    rows = [
        (
            "Priya Natarajan",
            "priya@northwind.example",
            "Homepage copy – v3 for review",
            "Hi! v3 of the homepage copy is in the shared doc. I tightened the hero line and cut the "
            "features section to three items. Could you review by Thursday so Marco can start the build?",
            0.7,
            True,
        ),
        (
            "GitHub",
            "notifications@github.example",
            "[northwind/mobile] Android 14 login crash (#482)",
            "Sam Okafor commented: I can reproduce it on a Pixel 8 – the keystore call throws on first "
            "launch. A fix needs the new auth SDK, which is still blocked on the security review.",
            2,
            True,
        ),
        (
            "Dana Whitfield",
            "dana@acme-corp.example",
            "Re: Launch date for the new site",
            "Thanks for the update. Our board meets at the end of the month, so a launch before then "
            "would be ideal. Is the redirects issue likely to push the date?",
            5,
            True,
        ),
        (
            "Lena Fischer",
            "lena@northwind.example",
            "Beta feedback summary – week 2",
            "42 testers this week. Top requests: offline mode (again), bigger tap targets in settings, "
            "and a dark-mode toggle. Crash-free sessions are at 97.8%, down from 99.1% – mostly the "
            "Android 14 login crash.",
            20,
            True,
        ),
        (
            "Marco Rossi",
            "marco@northwind.example",
            "CMS migration: blocked on redirects",
            "I can't finish the blog migration until we agree on the URL scheme for old posts. Can we "
            "decide in tomorrow's stand-up? I'd suggest keeping /blog/<slug> and redirecting the rest.",
            27,
            False,
        ),
        (
            "Northwind Finance",
            "billing@northwind.example",
            "Invoice #2024-118 paid",
            "Invoice #2024-118 from Lumen Studio (hero photography, 1,850.00 EUR) has been paid. No action needed.",
            50,
            False,
        ),
        (
            "Alex Kim",
            "alex@northwind.example",
            "Webinar speakers shortlist",
            "Here's the shortlist for the Q3 webinar series: two customers, one analyst and our CTO. "
            "Two have confirmed; I'm waiting on the analyst's agency before I can book the rest.",
            54,
            False,
        ),
        (
            "People Team",
            "people@northwind.example",
            "Reminder: submit your expenses by Friday",
            "A friendly reminder that expense claims for last month are due by Friday at 17:00. "
            "Late claims roll over to next month's payroll.",
            75,
            False,
        ),
    ]
    Email.objects.bulk_create(
        Email(
            user=user,
            sender_name=name,
            sender_email=address,
            subject=subject,
            snippet=body[:140].rsplit(" ", 1)[0] + "…",
            body=body,
            received_at=now - timedelta(hours=hours),
            unread=unread,
        )
        for name, address, subject, body, hours, unread in rows
    )


def _meetings(user: Any, now: datetime, me: str) -> None:
    today = timezone.localdate(now)
    Meeting.objects.create(
        user=user,
        title="Website relaunch sync",
        start=_at(today - timedelta(days=1), 10, 0),
        attendees=[me, "Priya Natarajan", "Marco Rossi", "Dana Whitfield"],
        summary=(
            "Reviewed the relaunch timeline with Acme. Homepage copy is nearly final; the blog "
            "migration is blocked until the redirect scheme is agreed. Dana needs a firm launch date "
            "before the end-of-month board meeting. We agreed to keep /blog/<slug> URLs and to run an "
            "accessibility audit before launch."
        ),
        action_items=[
            {"text": "Send Dana a launch date with a buffer for redirects", "owner": me, "done": False},
            {"text": "Write the redirect map for old blog URLs", "owner": "Marco Rossi", "done": False},
            {"text": "Share homepage copy v3 for review", "owner": "Priya Natarajan", "done": True},
            {"text": "Book an external accessibility audit", "owner": me, "done": False},
            {"text": "Check CMS licence covers staging", "owner": "Marco Rossi", "done": False},
        ],
    )
    Meeting.objects.create(
        user=user,
        title="Mobile app 2.0 planning",
        start=_at(today - timedelta(days=4), 14, 0),
        attendees=[me, "Sam Okafor", "Lena Fischer", "Jordan Lee"],
        summary=(
            "Scoped the 2.0 release: offline mode is the headline feature, the Android 14 login crash "
            "must be fixed before the next beta, and store assets are nice-to-have."
        ),
        action_items=[
            {"text": "Spike offline sync conflict handling", "owner": "Sam Okafor", "done": True},
            {"text": "Summarize beta feedback weekly", "owner": "Lena Fischer", "done": True},
            {"text": "Draft App Store screenshots", "owner": "Jordan Lee", "done": False},
        ],
    )


def _posts(user: Any, now: datetime) -> None:
    SocialPost.objects.create(
        user=user,
        platform=SocialPost.Platform.LINKEDIN,
        text=(
            "Our new website is almost here! Faster pages, a cleaner look and everything you need in "
            "two clicks. Launching later this month – stay tuned."
        ),
        created_at=now - timedelta(days=2),
    )
    SocialPost.objects.create(
        user=user,
        platform=SocialPost.Platform.MASTODON,
        text="Beta testers: offline mode is coming to the app in 2.0. Thank you for all the feedback! #buildinpublic",
        created_at=now - timedelta(hours=6),
    )
