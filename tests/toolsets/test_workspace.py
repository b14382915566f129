from __future__ import annotations

import json
import re
from datetime import date, datetime, timedelta
from io import StringIO
from typing import Any, get_args

import jsonschema
import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.utils import timezone

from toolsets.base import ToolContext, ToolFailure
from toolsets.workspace.models import CalendarEvent, Email, Meeting, Project, SocialPost, Task
from toolsets.workspace.sample_data import OWNED_MODELS, has_data, seed_for_user
from toolsets.workspace.tools import (
    Platform,
    TaskPriority,
    TaskStatus,
    create_task,
    draft_social_post,
    get_email,
    get_meeting,
    get_task,
    list_emails,
    list_events,
    list_meetings,
    list_projects,
    list_tasks,
    toolset,
    update_task,
)

STALE = {
    "Migrate blog posts to the new CMS",
    "Set up redirects for old URLs",
    "Fix crash on Android 14 login",
    "Push notification settings screen",
    "Book webinar speakers",
    "Competitor pricing review",
}
OVERDUE = {
    "Set up redirects for old URLs",
    "Accessibility audit of key pages",
    "Fix crash on Android 14 login",
    "Competitor pricing review",
}


def ctx(user: Any) -> ToolContext:
    return ToolContext(user_id=user.pk)


def counts(user: Any) -> dict[str, int]:
    return {model.__name__: model.objects.filter(user=user).count() for model in OWNED_MODELS}


# Without passwords: hashing one costs about a second, and nothing here logs in.
@pytest.fixture
def user(db: Any) -> Any:
    return get_user_model().objects.create_user("alice")


@pytest.fixture
def other_user(db: Any) -> Any:
    return get_user_model().objects.create_user("mallory")


@pytest.fixture
def alice(user: Any) -> Any:
    seed_for_user(user)
    return user


@pytest.fixture
def mallory(other_user: Any) -> Any:
    seed_for_user(other_user)
    return other_user


def task_named(user: Any, name: str) -> Task:
    return Task.objects.get(user=user, name=name)


# -- seeding -------------------------------------------------------------------------------------


def test_seeding_is_idempotent_and_per_user(user: Any, other_user: Any) -> None:
    assert toolset.needs_setup is not None
    assert toolset.needs_setup(user.pk) is True

    assert seed_for_user(user) is True
    seeded = counts(user)
    assert seed_for_user(user) is False

    assert counts(user) == seeded
    assert toolset.needs_setup(user.pk) is False
    assert not has_data(other_user.pk)
    assert seed_for_user(other_user) is True
    assert counts(other_user) == seeded


def test_a_user_with_any_workspace_data_is_not_seeded(user: Any) -> None:
    SocialPost.objects.create(user=user, platform="x", text="My own draft")

    assert seed_for_user(user) is False
    assert counts(user) == {"Project": 0, "Task": 0, "CalendarEvent": 0, "Email": 0, "Meeting": 0, "SocialPost": 1}


def test_seeded_workspace_is_believable(alice: Any) -> None:
    today = timezone.localdate()
    assert counts(alice) == {
        "Project": 3,
        "Task": 14,
        "CalendarEvent": 7,
        "Email": 8,
        "Meeting": 2,
        "SocialPost": 2,
    }
    assert Email.objects.filter(user=alice, unread=True).count() == 4
    assert CalendarEvent.objects.filter(user=alice, start__date=today).count() >= 2
    assert set(SocialPost.objects.filter(user=alice).values_list("status", flat=True)) == {"draft"}
    assert len(set(Task.objects.filter(user=alice).values_list("assignee", flat=True))) >= 5


# -- tasks ---------------------------------------------------------------------------------------


def test_list_projects_counts_open_tasks(alice: Any) -> None:
    result = list_projects.func(ctx(alice))

    assert [p["name"] for p in result["projects"]] == ["Mobile app 2.0", "Q3 marketing", "Website relaunch"]
    website = result["projects"][2]
    assert (website["taskCount"], website["openTaskCount"]) == (5, 4)
    assert list_projects.summarize is not None
    assert list_projects.summarize(result) == "3 projects"


def test_stale_filter_returns_only_open_tasks_not_updated_for_n_days_across_projects(alice: Any) -> None:
    result = list_tasks.func(ctx(alice), stale_days=7)

    assert {t["name"] for t in result["tasks"]} == STALE
    assert result["projects"] == ["Mobile app 2.0", "Q3 marketing", "Website relaunch"]
    # The stalest first.
    updated = [t["updatedAt"] for t in result["tasks"]]
    assert updated == sorted(updated)
    # "Triage beta feedback" is as old but DONE.
    assert task_named(alice, "Triage beta feedback").updated_at < timezone.now() - timedelta(days=7)


def test_stale_days_threshold_moves_with_the_number(alice: Any) -> None:
    names = {t["name"] for t in list_tasks.func(ctx(alice), stale_days=14)["tasks"]}

    assert names == {"Fix crash on Android 14 login", "Push notification settings screen", "Competitor pricing review"}


def test_overdue_filter_returns_open_tasks_past_their_due_date(alice: Any) -> None:
    result = list_tasks.func(ctx(alice), overdue=True)

    assert {t["name"] for t in result["tasks"]} == OVERDUE
    assert all(date.fromisoformat(t["dueDate"]) < timezone.localdate() for t in result["tasks"])


def test_status_filter_accepts_several_statuses(alice: Any) -> None:
    blocked = list_tasks.func(ctx(alice), status=["BLOCKED"])
    active = list_tasks.func(ctx(alice), status=["TODO", "IN_PROGRESS"])

    assert {t["name"] for t in blocked["tasks"]} == {"Set up redirects for old URLs", "Book webinar speakers"}
    assert active["count"] == 10
    assert {t["status"] for t in active["tasks"]} == {"TODO", "IN_PROGRESS"}


def test_project_and_assignee_filters_combine(alice: Any) -> None:
    result = list_tasks.func(ctx(alice), project="website", assignee="marco")

    assert {t["name"] for t in result["tasks"]} == {
        "Migrate blog posts to the new CMS",
        "Set up redirects for old URLs",
    }
    assert result["projects"] == ["Website relaunch"]


def test_the_users_own_name_is_an_assignee(alice: Any) -> None:
    result = list_tasks.func(ctx(alice), assignee=alice.get_username())

    assert result["count"] == 3


def test_unknown_project_names_the_users_projects(alice: Any) -> None:
    with pytest.raises(ValueError, match=re.escape("Unknown project 'Moonshot'. Your projects: Mobile app 2.0, Q3")):
        list_tasks.func(ctx(alice), project="Moonshot")


def test_limit_reports_the_total(alice: Any) -> None:
    result = list_tasks.func(ctx(alice), limit=3)

    assert result["count"] == 3
    assert result["total"] == 14


def test_task_shape_is_json_with_iso_dates(alice: Any) -> None:
    result = list_tasks.func(ctx(alice), status=["IN_PROGRESS"])
    task = next(t for t in result["tasks"] if t["name"] == "Finalize homepage copy")

    assert set(task) == {"id", "name", "status", "priority", "dueDate", "assignee", "project", "updatedAt"}
    assert task["dueDate"] == (timezone.localdate() + timedelta(days=2)).isoformat()
    assert datetime.fromisoformat(task["updatedAt"]).tzinfo is not None
    assert json.loads(json.dumps(result)) == result


def test_list_tasks_summaries() -> None:
    summarize = list_tasks.summarize
    assert summarize is not None

    assert summarize({"tasks": [{}] * 12, "count": 12, "projects": ["a", "b", "c"]}) == "12 tasks from 3 projects"
    assert summarize({"tasks": [{}], "count": 1, "projects": ["a"]}) == "1 task from 1 project"
    assert summarize({"tasks": [], "count": 0, "projects": []}) == "No tasks match"


def test_summaries_of_real_results(alice: Any) -> None:
    def summary(tool_: Any, **kwargs: Any) -> str:
        return str(tool_.summarize(tool_.func(ctx(alice), **kwargs)))

    assert summary(list_tasks) == "14 tasks from 3 projects"
    assert summary(list_tasks, status=["DONE"], overdue=True) == "No tasks match"
    assert summary(list_emails) == "8 emails, 4 unread"
    assert summary(list_emails, unread_only=True) == "4 unread emails"
    assert summary(list_meetings) == "2 meetings"
    assert summary(get_task, task_id=task_named(alice, "Book webinar speakers").pk) == (
        "Book webinar speakers (BLOCKED)"
    )
    assert summary(list_events).startswith("7 events, Mon ")


def test_another_users_task_cannot_be_read_or_changed(alice: Any, mallory: Any) -> None:
    theirs = task_named(mallory, "Book webinar speakers")

    with pytest.raises(ValueError, match=f"Task {theirs.pk} not found"):
        get_task.func(ctx(alice), task_id=theirs.pk)
    with pytest.raises(ValueError, match=f"Task {theirs.pk} not found"):
        update_task.func(ctx(alice), task_id=theirs.pk, status="DONE", name="Pwned")

    theirs.refresh_from_db()
    assert (theirs.status, theirs.name) == ("BLOCKED", "Book webinar speakers")
    assert {t["id"] for t in list_tasks.func(ctx(alice))["tasks"]}.isdisjoint(
        Task.objects.filter(user=mallory).values_list("pk", flat=True)
    )


def test_tools_refuse_a_context_without_a_user(alice: Any) -> None:
    with pytest.raises(ToolFailure) as failure:
        list_tasks.func(ToolContext())

    assert failure.value.error_type == "permission_denied"


def test_create_task_in_a_project(alice: Any) -> None:
    due = (timezone.localdate() + timedelta(days=9)).isoformat()

    result = create_task.func(
        ctx(alice), project="Mobile app 2.0", name="  Dark mode  ", priority="HIGH", due_date=due, assignee="Sam"
    )

    task = Task.objects.get(pk=result["id"])
    assert (task.user, task.project.name, task.name, task.status) == (alice, "Mobile app 2.0", "Dark mode", "TODO")
    assert result["dueDate"] == due
    assert result["priority"] == "HIGH"
    assert create_task.side_effects is True
    assert create_task.summarize is not None
    assert create_task.summarize(result) == "Created “Dark mode” in Mobile app 2.0"


def test_create_task_rejects_bad_dates_and_other_users_projects(alice: Any, other_user: Any) -> None:
    Project.objects.create(user=other_user, name="Secret plans")

    with pytest.raises(ValueError, match="due_date: 'next tuesday' is not a date"):
        create_task.func(ctx(alice), project="Q3 marketing", name="Plan", due_date="next tuesday")
    with pytest.raises(ValueError, match="Unknown project 'Secret plans'"):
        create_task.func(ctx(alice), project="Secret plans", name="Peek")
    with pytest.raises(ValueError, match="needs a name"):
        create_task.func(ctx(alice), project="Q3 marketing", name="   ")

    assert Task.objects.filter(user=alice).count() == 14


def test_update_task_changes_fields_and_bumps_updated_at(alice: Any) -> None:
    task = task_named(alice, "Fix crash on Android 14 login")
    before = task.updated_at

    result = update_task.func(ctx(alice), task_id=task.pk, status="IN_PROGRESS", due_date="", assignee="Lena Fischer")

    task.refresh_from_db()
    assert (task.status, task.due_date, task.assignee) == ("IN_PROGRESS", None, "Lena Fischer")
    assert task.updated_at > before + timedelta(days=14)
    assert result["status"] == "IN_PROGRESS"
    assert task.name not in {t["name"] for t in list_tasks.func(ctx(alice), stale_days=7)["tasks"]}


def test_update_task_needs_something_to_change(alice: Any) -> None:
    task = task_named(alice, "Book webinar speakers")

    with pytest.raises(ValueError, match="Nothing to update"):
        update_task.func(ctx(alice), task_id=task.pk)


# -- calendar, email, meetings, posts -----------------------------------------------------------


def test_events_default_to_the_current_week(alice: Any) -> None:
    today = timezone.localdate()
    monday = today - timedelta(days=today.weekday())
    CalendarEvent.objects.create(
        user=alice,
        title="Next week",
        start=timezone.now() + timedelta(days=8),
        end=timezone.now() + timedelta(days=8, hours=1),
    )

    result = list_events.func(ctx(alice))

    assert (result["startDate"], result["endDate"]) == (monday.isoformat(), (monday + timedelta(days=6)).isoformat())
    assert result["count"] == 7
    days = [datetime.fromisoformat(e["start"]).date() for e in result["events"]]
    assert all(monday <= day <= monday + timedelta(days=6) for day in days)
    assert days.count(today) >= 2
    assert "Next week" not in {e["title"] for e in result["events"]}


def test_events_in_an_explicit_range(alice: Any) -> None:
    today = timezone.localdate()

    only_today = list_events.func(ctx(alice), start_date=today.isoformat(), end_date=today.isoformat())
    far_away = list_events.func(ctx(alice), start_date="2001-01-01")

    assert {"Daily stand-up", "Lunch with Alex"} <= {e["title"] for e in only_today["events"]}
    assert far_away["count"] == 0
    assert far_away["endDate"] == "2001-01-07"
    with pytest.raises(ValueError, match="end_date is before start_date"):
        list_events.func(ctx(alice), start_date="2025-06-10", end_date="2025-06-01")


def test_unread_emails_newest_first(alice: Any, mallory: Any) -> None:
    result = list_emails.func(ctx(alice), unread_only=True)

    assert result["count"] == 4
    assert all(e["unread"] for e in result["emails"])
    received = [e["receivedAt"] for e in result["emails"]]
    assert received == sorted(received, reverse=True)
    assert result["emails"][0]["sender"] == {"name": "Priya Natarajan", "email": "priya@northwind.example"}


def test_get_email_returns_the_body_only_to_its_owner(alice: Any, mallory: Any) -> None:
    mine = Email.objects.filter(user=alice).first()
    theirs = Email.objects.filter(user=mallory).first()
    assert mine is not None and theirs is not None

    assert get_email.func(ctx(alice), email_id=mine.pk)["body"] == mine.body
    with pytest.raises(ValueError, match=f"Email {theirs.pk} not found"):
        get_email.func(ctx(alice), email_id=theirs.pk)


def test_yesterdays_meeting_has_a_summary_and_action_items(alice: Any) -> None:
    yesterday = (timezone.localdate() - timedelta(days=1)).isoformat()

    result = list_meetings.func(ctx(alice), date=yesterday)

    assert result["count"] == 1
    meeting = result["meetings"][0]
    assert (meeting["title"], meeting["date"]) == ("Website relaunch sync", yesterday)
    assert meeting["summary"]
    assert 4 <= len(meeting["actionItems"]) <= 5
    assert all(set(item) == {"text", "owner", "done"} for item in meeting["actionItems"])
    assert list_meetings.func(ctx(alice), date="yesterday") == result
    assert list_meetings.summarize is not None
    assert list_meetings.summarize(result) == f"1 meeting on {yesterday}"


def test_get_meeting_is_owner_only(alice: Any, mallory: Any) -> None:
    mine = Meeting.objects.get(user=alice, title="Website relaunch sync")
    theirs = Meeting.objects.get(user=mallory, title="Website relaunch sync")

    result = get_meeting.func(ctx(alice), meeting_id=mine.pk)

    assert get_meeting.summarize is not None
    assert get_meeting.summarize(result) == "Website relaunch sync: 5 action items, 4 open"
    with pytest.raises(ValueError, match="not found"):
        get_meeting.func(ctx(alice), meeting_id=theirs.pk)


def test_draft_social_post_is_saved_as_a_draft(alice: Any) -> None:
    result = draft_social_post.func(ctx(alice), platform="bluesky", text="  Launch day!  ")

    post = SocialPost.objects.get(pk=result["id"])
    assert (post.user, post.platform, post.text, post.status) == (alice, "bluesky", "Launch day!", "draft")
    assert (result["platformName"], result["characters"], result["limit"]) == ("Bluesky", 11, 300)
    assert draft_social_post.summarize is not None
    assert draft_social_post.summarize(result) == "Saved a Bluesky draft (11 characters)"


def test_a_post_too_long_for_the_platform_is_refused(alice: Any) -> None:
    with pytest.raises(ValueError, match="X posts are limited to 280 characters; this one has 281"):
        draft_social_post.func(ctx(alice), platform="x", text="a" * 281)

    assert SocialPost.objects.filter(user=alice).count() == 2


# -- command, schema -----------------------------------------------------------------------------


def test_command_seeds_every_user_once(user: Any, other_user: Any) -> None:
    out = StringIO()
    call_command("seed_workspace", "--all", stdout=out)

    assert has_data(user.pk) and has_data(other_user.pk)
    assert "Done: 2 of 2 user(s) seeded." in out.getvalue()

    again = StringIO()
    call_command("seed_workspace", "--all", stdout=again)
    assert "alice already has workspace data; left unchanged." in again.getvalue()
    assert Project.objects.filter(user=user).count() == 3


def test_command_seeds_one_user_by_name(user: Any, other_user: Any) -> None:
    call_command("seed_workspace", "--user", "mallory", stdout=StringIO())

    assert has_data(other_user.pk) and not has_data(user.pk)
    with pytest.raises(CommandError, match="No user named 'nobody'"):
        call_command("seed_workspace", "--user", "nobody", stdout=StringIO())


def test_list_tasks_schema_has_status_enum_and_no_context() -> None:
    schema = list_tasks.parameters
    properties = schema["properties"]

    assert "ctx" not in properties
    assert list_tasks.wants_context is True
    assert properties["status"]["type"] == "array"
    assert properties["status"]["items"]["enum"] == ["TODO", "IN_PROGRESS", "BLOCKED", "DONE"]
    assert "required" not in schema
    jsonschema.Draft202012Validator.check_schema(schema)
    assert list(jsonschema.Draft202012Validator(schema).iter_errors({"status": ["LATER"]}))


def test_enums_match_the_model_choices() -> None:
    assert list(get_args(TaskStatus)) == Task.Status.values
    assert list(get_args(TaskPriority)) == Task.Priority.values
    assert list(get_args(Platform)) == SocialPost.Platform.values
    assert draft_social_post.parameters["properties"]["platform"]["enum"] == SocialPost.Platform.values


def test_every_tool_has_a_display_name_summary_and_status_text() -> None:
    assert toolset.id == "workspace"
    assert toolset.setup_label == "Create sample data"
    for tool_ in toolset.tools:
        assert tool_.display_name[:1].isupper()
        assert tool_.summarize is not None and tool_.status_text is not None
        assert tool_.status_text({}).endswith("…")
    assert {t.name for t in toolset.tools if t.side_effects} == {"create_task", "update_task", "draft_social_post"}


def test_has_data_is_one_query_whatever_the_answer(db: Any, django_assert_num_queries: Any) -> None:
    from django.contrib.auth import get_user_model

    from toolsets.workspace.sample_data import has_data, seed_for_user

    user = get_user_model().objects.create_user("quinn")
    with django_assert_num_queries(1):
        assert not has_data(user.pk)
    seed_for_user(user)
    with django_assert_num_queries(1):
        assert has_data(user.pk)


@pytest.mark.parametrize("kept", [model.__name__ for model in OWNED_MODELS])
def test_any_one_kind_of_data_counts_and_only_the_owners(db: Any, kept: str) -> None:
    from django.contrib.auth import get_user_model

    owner = get_user_model().objects.create_user("rhea")
    other = get_user_model().objects.create_user("sam")
    elsewhere = get_user_model().objects.create_user("tess")
    seed_for_user(owner)
    for model in OWNED_MODELS:
        if model.__name__ != kept:  # handed over, not deleted: a project's tasks would go with it
            model.objects.filter(user=owner).update(user=elsewhere)
    assert has_data(owner.pk)
    assert not has_data(other.pk)
