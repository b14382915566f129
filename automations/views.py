"""The owner's automation pages: the list, create and edit (with the next run times previewed as
the schedule is typed), an automation's page with its run history, Run now, and the webhook's
secret shown once. Admins see everyone's (and may act on them); everyone else only their own."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.db.models import QuerySet
from django.http import HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from core.http import AuthedRequest

from . import agents, live, runs, scheduler, webhooks
from .forms import AutomationForm, PreviewForm, may_create
from .models import Automation, AutomationRun
from .schedule import ScheduleError, parse


def _visible(request: AuthedRequest) -> QuerySet[Automation]:
    everyone = Automation.objects.select_related("owner", "model")
    return everyone if request.user.is_staff else everyone.filter(owner=request.user)


@login_required
@require_GET
def index(request: AuthedRequest) -> HttpResponse:
    shown = _visible(request)
    if not (request.user.is_staff and request.GET.get("all")):
        shown = shown.filter(owner=request.user)
    automations = list(shown)
    # Each row's latest run (its badge, live over the list's socket) and agent, with one query.
    latest = live.latest([a.pk for a in automations])
    for a in automations:
        a.last_run = latest.get(a.pk)  # type: ignore[attr-defined]
        a.agent_name = agents.name_of(a.agent)  # type: ignore[attr-defined]
    everyone = bool(request.user.is_staff and request.GET.get("all"))
    context = {"automations": automations, "may_create": may_create(request.user), "all": everyone}
    return render(request, "automations/index.html", context)


def _save(request: AuthedRequest, form: AutomationForm) -> HttpResponse:
    automation = form.save(commit=False)
    if automation.owner_id is None:
        automation.owner = request.user
    automation.enabled_tools = form.selection()
    secret = ""
    if automation.trigger == Automation.Trigger.WEBHOOK and not automation.webhook_key:
        automation.webhook_key, secret = webhooks.new_credentials()
        automation.webhook_secret = secret
    if automation.created_at is None:
        automation.created_at = timezone.now()
    automation.next_slot = scheduler.first_slot(automation, timezone.now())
    automation.save()
    form.save_m2m()
    if secret:
        return _show_secret(request, automation, secret)
    return HttpResponseRedirect(f"/automations/{automation.pk}/")


def _show_secret(request: AuthedRequest, automation: Automation, secret: str) -> HttpResponse:
    url = request.build_absolute_uri(f"/automations/hooks/{automation.webhook_key}/")
    return render(request, "automations/secret.html", {"automation": automation, "secret": secret, "url": url})


@login_required
@require_http_methods(["GET", "POST"])
def create(request: AuthedRequest) -> HttpResponse:
    if not may_create(request.user):
        return HttpResponse("An administrator has not allowed you to create automations.", status=403)
    form = AutomationForm(request.POST or None, user=request.user, instance=Automation(owner=request.user))
    if request.method == "POST" and form.is_valid():
        return _save(request, form)
    return render(request, "automations/edit.html", {"form": form}, status=400 if form.errors else 200)


@login_required
@require_http_methods(["GET", "POST"])
def edit(request: AuthedRequest, automation_id: int) -> HttpResponse:
    automation = get_object_or_404(_visible(request), pk=automation_id)
    form = AutomationForm(request.POST or None, user=automation.owner, instance=automation)
    if request.method == "POST" and form.is_valid():
        return _save(request, form)
    context = {"form": form, "automation": automation}
    return render(request, "automations/edit.html", context, status=400 if form.errors else 200)


@login_required
@require_GET
def detail(request: AuthedRequest, automation_id: int) -> HttpResponse:
    automation = get_object_or_404(_visible(request), pk=automation_id)
    history = live.history(automation.pk)
    upcoming: list[object] = []
    if automation.trigger == Automation.Trigger.SCHEDULE and automation.enabled:
        try:
            upcoming = scheduler.schedule_of(automation).upcoming(timezone.now(), 5)  # type: ignore[assignment]
        except ScheduleError:
            pass
    context = {
        "automation": automation,
        "agent_name": agents.name_of(automation.agent),
        "agent_tools": agents.own_toolsets(automation.agent),
        "runs": history,
        "upcoming": upcoming,
        "spent": runs.spent_this_month(automation),
        "hook": request.build_absolute_uri(f"/automations/hooks/{automation.webhook_key}/")
        if automation.webhook_key
        else "",
    }
    return render(request, "automations/detail.html", context)


@login_required
@require_POST
def run_now(request: AuthedRequest, automation_id: int) -> HttpResponse:
    automation = get_object_or_404(_visible(request), pk=automation_id)
    with transaction.atomic():
        run = AutomationRun.objects.create(automation=automation, origin=AutomationRun.Origin.MANUAL)
        runs.start(run)
    return HttpResponseRedirect(f"/automations/{automation.pk}/")


@login_required
@require_POST
def rotate_secret(request: AuthedRequest, automation_id: int) -> HttpResponse:
    automation = get_object_or_404(_visible(request), pk=automation_id, trigger=Automation.Trigger.WEBHOOK)
    automation.webhook_key, secret = webhooks.new_credentials()
    automation.webhook_secret = secret
    automation.save(update_fields=["webhook_key", "webhook_secret", "updated_at"])
    return _show_secret(request, automation, secret)


@login_required
@require_POST
def delete(request: AuthedRequest, automation_id: int) -> HttpResponse:
    automation = get_object_or_404(_visible(request), pk=automation_id)
    automation.delete()
    return HttpResponseRedirect("/automations/")


@login_required
@require_GET
def preview(request: AuthedRequest) -> HttpResponse:
    """The next five run times of the schedule being typed, or why it cannot be read."""
    form = PreviewForm(request.GET)
    if not form.is_valid():
        return HttpResponse("Give a schedule and a time zone.", status=400)
    text, zone = form.cleaned_data["schedule"], form.cleaned_data["timezone"] or "UTC"
    context: dict[str, object] = {"zone": zone}
    try:
        context["upcoming"] = parse(text, zone, timezone.now()).upcoming(timezone.now(), 5)
    except ScheduleError as exc:
        context["error"] = str(exc)
    return render(request, "automations/_preview.html", context)
