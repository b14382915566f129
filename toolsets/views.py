from __future__ import annotations

import json
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET, require_POST

from core.http import AuthedRequest

from . import availability, policy
from .base import Toolset
from .models import ToolExecution, UserToolPolicy, UserToolsetConfig
from .registry import get_toolset

MAX_KEY_LENGTH = 500


def _tool_rows(toolset: Toolset, book: policy.PolicyBook) -> list[dict[str, Any]]:
    """Each tool of a toolset with its policy for this user and the choices they have."""
    rows = []
    for tool in toolset.tools:
        found = book.get(toolset, tool)
        choices = [(p, policy.LABELS[p]) for p in found.user_choices]
        rows.append({"tool": tool, "policy": found.policy, "choices": choices, "locked": len(choices) == 1})
    return rows


def _card(request: AuthedRequest, toolset_id: str, **extra: Any) -> HttpResponse:
    state = availability.for_toolset(request.user.pk, toolset_id)
    if state is None:
        raise Http404
    tool_rows = _tool_rows(state.toolset, policy.PolicyBook(request.user.pk))
    return render(request, "toolsets/_toolset_card.html", {"state": state, "tool_rows": tool_rows, **extra})


def _config(request: AuthedRequest, toolset_id: str) -> UserToolsetConfig:
    toolset = get_toolset(toolset_id)
    if toolset is None:
        raise Http404
    config, _ = UserToolsetConfig.objects.get_or_create(
        user=request.user, toolset_id=toolset_id, defaults={"enabled": toolset.enabled_by_default}
    )
    return config


@login_required
@require_GET
def settings_page(request: AuthedRequest) -> HttpResponse:
    states = list(availability.for_user(request.user.pk).values())
    book = policy.PolicyBook(request.user.pk)
    cards = [(state, _tool_rows(state.toolset, book)) for state in states]
    return render(request, "toolsets/settings.html", {"cards": cards})


@login_required
@require_POST
def set_tool_policy(request: AuthedRequest, toolset_id: str) -> HttpResponse:
    """A user's own policy for one tool: as strict as the administrator's, or stricter."""
    toolset = get_toolset(toolset_id)
    tool = toolset.get(request.POST.get("tool", "")) if toolset else None
    if toolset is None or tool is None:
        raise Http404
    chosen = request.POST.get("policy", "")
    found = policy.PolicyBook(None).get(toolset, tool)  # without the user's own choice
    if chosen not in found.user_choices:
        return HttpResponse(
            f"{tool.display_name}: choose one of {', '.join(policy.LABELS[p] for p in found.user_choices)}; "
            "you can make a tool stricter than the administrator's policy, never looser.",
            status=400,
        )
    if chosen == found.admin_policy:
        UserToolPolicy.objects.filter(user=request.user, toolset_id=toolset_id, tool=tool.name).delete()
    else:
        UserToolPolicy.objects.update_or_create(
            user=request.user, toolset_id=toolset_id, tool=tool.name, defaults={"policy": chosen}
        )
    return _card(request, toolset_id, tools_open=True, policy_message=f"{tool.display_name}: {policy.LABELS[chosen]}.")


@login_required
@require_POST
def set_enabled(request: AuthedRequest, toolset_id: str) -> HttpResponse:
    config = _config(request, toolset_id)
    config.enabled = request.POST.get("enabled") in ("on", "true", "1")
    config.save(update_fields=["enabled", "updated_at"])
    return _card(request, toolset_id)


@login_required
@require_POST
def save_key(request: AuthedRequest, toolset_id: str) -> HttpResponse:
    config = _config(request, toolset_id)
    key = request.POST.get("api_key", "").strip()
    if request.POST.get("clear"):
        config.api_key = ""
        message = "Your key was removed."
    elif key:
        if len(key) > MAX_KEY_LENGTH or not key.isprintable() or any(c.isspace() for c in key):
            return _card(request, toolset_id, key_error="That does not look like an API key.")
        config.api_key = key
        config.enabled = True
        message = "Key saved."
    else:
        message = "Nothing changed: the key field was empty."
    config.save()
    return _card(request, toolset_id, key_message=message)


@login_required
@require_POST
def run_setup(request: AuthedRequest, toolset_id: str) -> HttpResponse:
    toolset = get_toolset(toolset_id)
    if toolset is None or toolset.setup is None:
        raise Http404
    toolset.setup(request.user.pk)
    config = _config(request, toolset_id)
    if not config.enabled:
        config.enabled = True
        config.save(update_fields=["enabled", "updated_at"])
    return _card(request, toolset_id)


@login_required
@require_GET
def execution_detail(request: AuthedRequest, execution_id: int) -> HttpResponse:
    """The full stored result of one call (cards and the model only get a capped version)."""
    execution = get_object_or_404(ToolExecution, pk=execution_id, user=request.user)
    body = json.dumps(execution.result, indent=2, ensure_ascii=False, default=str)
    return render(request, "toolsets/execution.html", {"execution": execution, "body": body})
