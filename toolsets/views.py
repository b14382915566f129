from __future__ import annotations

import json
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from core.http import AuthedRequest

from . import availability
from .models import ApiToken, ToolExecution, UserToolsetConfig
from .registry import get_toolset

MAX_KEY_LENGTH = 500


def _card(request: AuthedRequest, toolset_id: str, **extra: Any) -> HttpResponse:
    state = availability.for_toolset(request.user.pk, toolset_id)
    if state is None:
        raise Http404
    return render(request, "toolsets/_toolset_card.html", {"state": state, **extra})


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
    tokens = ApiToken.objects.filter(user=request.user, revoked_at=None)
    return render(request, "toolsets/settings.html", {"states": states, "tokens": tokens})


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
@require_POST
def create_token(request: AuthedRequest) -> HttpResponse:
    name = " ".join(request.POST.get("name", "").split())[:100] or "API token"
    if not name.isprintable():
        return HttpResponse("A token name can only hold printable characters.", status=400)
    record, token = ApiToken.issue(request.user, name)
    tokens = ApiToken.objects.filter(user=request.user, revoked_at=None)
    return render(request, "toolsets/_tokens.html", {"tokens": tokens, "new_token": token, "new_record": record})


@login_required
@require_POST
def revoke_token(request: AuthedRequest, token_id: int) -> HttpResponse:
    record = get_object_or_404(ApiToken, pk=token_id, user=request.user, revoked_at=None)
    record.revoked_at = timezone.now()
    record.save(update_fields=["revoked_at"])
    tokens = ApiToken.objects.filter(user=request.user, revoked_at=None)
    return render(request, "toolsets/_tokens.html", {"tokens": tokens})


@login_required
@require_GET
def execution_detail(request: AuthedRequest, execution_id: int) -> HttpResponse:
    """The full stored result of one call (cards and the model only get a capped version)."""
    execution = get_object_or_404(ToolExecution, pk=execution_id, user=request.user)
    body = json.dumps(execution.result, indent=2, ensure_ascii=False, default=str)
    return render(request, "toolsets/execution.html", {"execution": execution, "body": body})
