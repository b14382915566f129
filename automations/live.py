"""An automation's run history, live: every change of a run (started, running, waiting, its
end, a retry) pushes the history as it is now to the automation's open pages, over their own
socket (`consumers.AutomationConsumer`). One partial for page and socket
(automations/_runs.html), so the two never drift apart.

Why a socket of its own, not the user socket the bell uses: an admin may watch someone else's
automation, and the page must hear of runs started elsewhere (beat, a webhook, another tab) the
moment they change; polling would query every few seconds on every open page, whether anything
ran or not. Runs change a few times each, so each change re-renders the short history (one
query) rather than patching rows: a new run, a status and a retry are all the same push.

The list of automations hears the same changes: each row's latest-run badge
(automations/_badge.html, one partial for the list page and the push) goes to its owner's list
socket and to admins watching everyone's list (`consumers.AutomationListConsumer`)."""

from __future__ import annotations

import logging

from asgiref.sync import async_to_sync
from django.db import transaction
from django.db.models import OuterRef, Subquery
from django.template.loader import render_to_string

from .models import Automation, AutomationRun

log = logging.getLogger(__name__)

HISTORY = 50


def group(automation_id: int) -> str:
    return f"automation-{automation_id}"


def history(automation_id: int) -> list[AutomationRun]:
    return list(AutomationRun.objects.filter(automation_id=automation_id)[:HISTORY])


def list_group(owner_id: int) -> str:
    return f"automations-of-{owner_id}"


# Admins looking at everyone's automations (the list's "Everyone's").
EVERYONE = "automations-everyone"


def latest(automation_ids: list[int]) -> dict[int, AutomationRun]:
    """Each automation's latest run (one query), for its badge."""
    newest = (
        Automation.objects.filter(pk__in=automation_ids)
        .annotate(
            last=Subquery(AutomationRun.objects.filter(automation=OuterRef("pk")).order_by("-id").values("pk")[:1])
        )
        .values("last")
    )
    return {run.automation_id: run for run in AutomationRun.objects.filter(pk__in=newest)}


def badge_html(automation_id: int, run: AutomationRun | None, *, oob: bool) -> str:
    return render_to_string("automations/_badge.html", {"automation_id": automation_id, "run": run, "oob": oob})


def runs_html(automation_id: int, runs: list[AutomationRun], *, oob: bool) -> str:
    return render_to_string("automations/_runs.html", {"automation_id": automation_id, "runs": runs, "oob": oob})


def changed(automation_id: int) -> None:
    """A run of the automation changed: its open pages show the history once that commits."""
    transaction.on_commit(lambda: _push(automation_id))


def _push(automation_id: int) -> None:
    try:
        from channels.layers import get_channel_layer

        layer = get_channel_layer()
        if layer is None:
            return
        runs = history(automation_id)
        html = runs_html(automation_id, runs, oob=True)
        send = async_to_sync(layer.group_send)
        send(group(automation_id), {"type": "runs.fragment", "html": html})
        row = Automation.objects.filter(pk=automation_id).values_list("owner_id", "next_slot").first()
        if row is None:
            return  # deleted meanwhile: no list shows it
        owner_id, next_slot = row
        # The slot a run started has moved the next one on: the list's row shows both.
        badge = badge_html(automation_id, runs[0] if runs else None, oob=True) + render_to_string(
            "automations/_next.html", {"automation_id": automation_id, "next_slot": next_slot, "oob": True}
        )
        for listening in (list_group(owner_id), EVERYONE):
            send(listening, {"type": "runs.fragment", "html": badge})
    except Exception:
        # The page shows the history again on reload; the rows are the truth.
        log.warning("Pushing the runs of automation %s failed", automation_id, exc_info=True)
