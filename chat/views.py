from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.db.models import Exists, OuterRef, QuerySet
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseClientRedirect

from core import groups as member_groups
from core.http import AuthedRequest
from knowledge import access as knowledge_access
from knowledge import attach as knowledge_attach
from toolsets.files import attach

from . import branches, forms, live, pending, run_marks
from . import selection as sel
from .agents.registry import name_of as agent_name
from .exchanges import enabled_models, lock_idle, new_exchange_html, page_of_exchanges, start_turn
from .models import AppSettings, Chat, LLMModel, PendingMessage, Turn, UserChatDefaults
from .spend import budgets
from .worker import turn_queue


def _get_chat_for_user(request: AuthedRequest, chat_id: int, chats: QuerySet[Chat] | None = None) -> Chat:
    """Every chat lookup goes through here: another user's chat is a 404, never a 403."""
    chats = Chat.objects.all() if chats is None else chats
    return get_object_or_404(chats.select_related("model"), pk=chat_id, owner=request.user)


def _with_owner_facts() -> QuerySet[Chat]:
    """The chat page's chat, with what the rest of the page needs to know of its owner: their
        groups (for the models, the toolsets, the agents and the budgets, read once) and whether any
        budget applies to them (the budgets are read only then), and whether they may see any knowledge
        base (listed in the tools popover only then), and whether messages wait in its queue (read only
    then). All ride on the chat's own query, so a page
        costs the same number of queries as before groups, budgets and bases existed."""
    owner = OuterRef("owner_id")
    return Chat.objects.annotate(
        owner_groups=member_groups.ids_subquery(owner),
        owner_budgeted=budgets.any_for(owner),
        owner_has_bases=knowledge_access.any_visible(owner),
        has_pending=Exists(PendingMessage.objects.filter(chat=OuterRef("pk"))),
    )


def _sidebar_chats(request: AuthedRequest) -> Any:
    listed = Chat.objects.filter(owner=request.user, listed=True).only("id", "title", "updated_at", "automated")
    return run_marks.attach(listed[:100])


@login_required
@require_GET
def home(request: AuthedRequest) -> HttpResponse:
    defaults = _defaults(request)
    app = AppSettings.load()
    return render(
        request,
        "chat/page.html",
        {
            "chat": None,
            "chats": _sidebar_chats(request),
            "exchanges": [],
            "models": enabled_models(request.user.pk),
            "current_model": LLMModel.default(request.user.pk),
            "budget_warning": _budget_warning(request.user.pk),
            # The settings the chat the first message creates will have, chosen before it.
            "values": _Draft(True, min(app.default_max_tool_iterations, app.max_tool_iterations_cap)),
            "settings_url": reverse("chat:draft_settings"),
            "cap": app.max_tool_iterations_cap,
            **_popover_context(request, sel.clean(defaults.enabled_tools), reverse("chat:default_tools")),
        },
    )


def _budget_warning(user_id: int, groups: frozenset[int] | None = None, budgeted: bool = True) -> str:
    """Above the composer, once a budget is nearly used up (one query without a budget, none
    when the caller knows no budget applies: `budgeted` False)."""
    from core.redis_client import sync_client

    if not budgeted:
        return ""
    for left in budgets.left_for(user_id, sync_client(), groups):
        if left.warn:
            parts = []
            if left.cost_left is not None:
                parts.append(f"{left.cost_left:.2f} USD")
            if left.tokens_left is not None:
                parts.append(f"{left.tokens_left:,} tokens")
            return f"{left.label} is nearly used up: {' and '.join(parts)} left until {left.resets:%-d %B} (UTC)."
    return ""


def _model_context(chat: Chat, groups: frozenset[int] | None = None) -> dict[str, Any]:
    """The models the owner may pick, the one the chat's next message uses, and why that is not
    the chat's own when the owner lost it (limited to groups they are not in, or turned off)."""
    models = enabled_models(chat.owner_id, groups)
    model, lost = chat.next_model(models)
    notice = ""
    if lost:
        notice = f"{lost} is not available to you any more: new messages use {model.name if model else 'no model'}."
    return {"models": models, "current_model": model, "model_notice": notice}


@dataclass
class _Draft:
    """A new chat's settings before the chat exists (the panel shows them like a chat's)."""

    limit_tool_iterations: bool
    max_tool_iterations: int


@login_required
@require_GET
def chat_detail(request: AuthedRequest, chat_id: int) -> HttpResponse:
    chat = _get_chat_for_user(request, chat_id, _with_owner_facts())
    groups = member_groups.parse(chat.owner_groups)  # type: ignore[attr-defined]
    exchanges, earlier = page_of_exchanges(chat)
    tools_url = reverse("chat:tools", args=[chat.pk])
    chats = _sidebar_chats(request)
    # The header's run badge: the list's, else (a run older than the list) asked for.
    chat.run_badge = next((c.run_badge for c in chats if c.pk == chat.pk), None)  # type: ignore[attr-defined]
    if chat.automated and chat.run_badge is None:  # type: ignore[attr-defined]
        run_marks.attach([chat])
    return render(
        request,
        "chat/page.html",
        {
            "chat": chat,
            "chat_agent": agent_name(chat.agent),  # a chat held as an agent (an automation's run)
            "chats": chats,
            "exchanges": exchanges,
            "earlier": earlier,
            **_model_context(chat, groups),
            "budget_warning": _budget_warning(request.user.pk, groups, chat.owner_budgeted),  # type: ignore[attr-defined]
            "cap": AppSettings.load().max_tool_iterations_cap,
            "values": chat,
            "settings_url": reverse("chat:settings", args=[chat.pk]),
            **_popover_context(request, sel.clean(chat.enabled_tools), tools_url, groups=groups),
            "kb_choices": knowledge_attach.choices(request.user.pk, chat.pk) if chat.owner_has_bases else [],  # type: ignore[attr-defined]
            "pending_box": pending.box_html(chat, oob=False, empty=not chat.has_pending),  # type: ignore[attr-defined]
        },
    )


@login_required
@require_GET
def earlier(request: AuthedRequest, chat_id: int) -> HttpResponse:
    """Older exchanges, asked for by the page when the reader scrolls to the top."""
    chat = _get_chat_for_user(request, chat_id)
    try:
        before = int(request.GET.get("before", ""))
    except ValueError:
        return HttpResponse("Which exchanges? 'before' must be a turn id.", status=400)
    exchanges, more = page_of_exchanges(chat, before)
    context = {"chat": chat, "exchanges": exchanges, "earlier": more, "models": enabled_models(request.user.pk)}
    return render(request, "chat/_earlier_page.html", context)


@login_required
@require_POST
def create_chat(request: AuthedRequest) -> HttpResponse:
    """Creates a chat from the first message typed on the home page."""
    form = forms.NewChatForm(request.POST, user_id=request.user.pk)
    if not form.is_valid():
        return HttpResponse(forms.first_error(form), status=400)
    content = form.cleaned_data["content"]
    try:
        files = attach.claim(request.user.pk, request.POST.getlist("attachments"))
    except attach.Refused as exc:
        return HttpResponse(str(exc), status=400)
    if files and not content:
        return HttpResponse("Type a message to send with the files.", status=400)
    try:
        chat = new_chat(request, form)
    except NotCreated as exc:
        return HttpResponse(str(exc), status=400)
    if content:
        with transaction.atomic():
            message, _ = start_turn(chat, content, parent=None)
            attach.link(files, message)
    url = reverse("chat:detail", args=[chat.pk])
    if request.htmx:
        return HttpResponseClientRedirect(url)
    return redirect(url)


class NotCreated(Exception):
    """The home page's settings for a new chat were refused (the message says why)."""


def new_chat(request: AuthedRequest, form: forms.NewChatForm) -> Chat:
    """The chat the home page starts, with what it shows before the chat exists: the model and
    settings panel (when they came along) and the toolsets selection (the user's defaults).
    Shared by the first message and by an MCP prompt inserted there. `form` is valid."""
    app = AppSettings.load()
    limit, steps = True, min(app.default_max_tool_iterations, app.max_tool_iterations_cap)
    if form.cleaned_data["settings"]:
        # The settings panel came along: what the person chose before the first message.
        settings_form = forms.ChatSettingsForm(request.POST, cap=app.max_tool_iterations_cap, user_id=request.user.pk)
        if not settings_form.is_valid():
            raise NotCreated(forms.first_error(settings_form))
        limit = settings_form.cleaned_data["limit_tool_iterations"]
        steps = settings_form.cleaned_data["max_tool_iterations"] or steps
    return Chat.objects.create(
        owner=request.user,
        model=form.cleaned_data["model"] or LLMModel.default(request.user.pk),
        enabled_tools=new_chat_tools(request),
        limit_tool_iterations=limit,
        max_tool_iterations=steps,
    )


def new_chat_tools(request: AuthedRequest) -> sel.Selection:
    """The tools of the chat the home page would create now (its popover edits these)."""
    return sel.clean(_defaults(request).enabled_tools)


@login_required
@require_POST
def send_message(request: AuthedRequest, chat_id: int) -> HttpResponse:
    chat = _get_chat_for_user(request, chat_id)
    form = forms.MessageForm(request.POST)
    if not form.is_valid():
        return HttpResponse(forms.first_error(form), status=400)
    content = form.cleaned_data["content"]
    try:
        files = attach.claim(request.user.pk, request.POST.getlist("attachments"))
    except attach.Refused as exc:
        return HttpResponse(str(exc), status=400)
    had_title = bool(chat.title)
    with transaction.atomic():
        if not lock_idle(chat):
            # An answer is running: the message waits its turn (chat/pending.py), files too.
            pending.queue(chat, content, files)
            return HttpResponse(pending.box_html(chat))
        message, turn = start_turn(chat, content, parent=branches.last_turn(chat))
        attach.link(files, message)
    html = new_exchange_html(request, chat, turn, message, files)
    if not had_title:
        html += render_to_string("chat/_chat_link.html", {"item": chat, "chat": chat, "oob": True}, request)
    return HttpResponse(html)


@login_required
@require_POST
def stop(request: AuthedRequest, chat_id: int) -> HttpResponse:
    chat = _get_chat_for_user(request, chat_id)
    for turn in chat.turns.filter(status__in=Turn.ACTIVE):
        # A queued turn has no worker to tell: close it here. A running one stops itself.
        if Turn.cancel_if_queued(turn.pk):
            # Out of its owner's queue of the workers' fair share; the page shows it stopped.
            turn_queue.withdraw(turn)
            continue
        live.request_cancel(turn.pk)
    return HttpResponse(status=204)


@login_required
@require_POST
def rename(request: AuthedRequest, chat_id: int) -> HttpResponse:
    chat = _get_chat_for_user(request, chat_id)
    form = forms.RenameForm(request.POST)
    if not form.is_valid():
        return HttpResponse(forms.first_error(form), status=400)
    title = form.cleaned_data["title"]
    if title:
        chat.title = title
        chat.save(update_fields=["title", "updated_at"])
    run_marks.attach([chat])
    return render(request, "chat/_chat_link.html", {"item": chat, "chat": chat})


@login_required
@require_POST
def delete(request: AuthedRequest, chat_id: int) -> HttpResponse:
    chat = _get_chat_for_user(request, chat_id)
    for turn in chat.turns.filter(status=Turn.Status.RUNNING):
        live.request_cancel(turn.pk)
    chat.delete()
    return HttpResponseClientRedirect(reverse("chat:home"))


def _defaults(request: AuthedRequest) -> UserChatDefaults:
    defaults, _ = UserChatDefaults.objects.get_or_create(
        user=request.user, defaults={"enabled_tools": sel.default_selection()}
    )
    return defaults


def _popover_context(
    request: AuthedRequest,
    selection: sel.Selection,
    tools_url: str,
    groups: frozenset[int] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    rows = sel.popover_rows(request.user.pk, selection, groups)
    return {"rows": rows, "badge": sel.badge_count(rows), "tools_url": tools_url, **extra}


def _save_tools(request: AuthedRequest, previous: sel.Selection, tools_url: str, chat: Chat | None) -> HttpResponse:
    rows = sel.popover_rows(request.user.pk, previous)
    usable = sel.usable_keys(rows)
    selection = sel.from_form(request.POST.getlist("tools"), previous, usable)
    if chat is not None:
        chat.enabled_tools = selection
        chat.save(update_fields=["enabled_tools", "updated_at"])
        if "kb-form" in request.POST:  # the popover lists the user's bases only when they have some
            knowledge_attach.set_for_chat(request.user.pk, chat.pk, request.POST.getlist("kb"))
    # The last selection anywhere is what the next new chat starts with.
    UserChatDefaults.objects.update_or_create(user=request.user, defaults={"enabled_tools": selection})
    # Only the derived bits change (tri-state boxes, counts, badge): the tool boxes a person may
    # be clicking right now are never replaced under them.
    return render(request, "chat/_toolsets_saved.html", _popover_context(request, selection, tools_url))


@login_required
@require_POST
def update_tools(request: AuthedRequest, chat_id: int) -> HttpResponse:
    chat = _get_chat_for_user(request, chat_id)
    return _save_tools(request, sel.clean(chat.enabled_tools), reverse("chat:tools", args=[chat.pk]), chat)


@login_required
@require_POST
def update_default_tools(request: AuthedRequest) -> HttpResponse:
    return _save_tools(request, sel.clean(_defaults(request).enabled_tools), reverse("chat:default_tools"), None)


@login_required
@require_POST
def update_settings(request: AuthedRequest, chat_id: int) -> HttpResponse:
    chat = _get_chat_for_user(request, chat_id)
    cap = AppSettings.load().max_tool_iterations_cap
    form = forms.ChatSettingsForm(request.POST, cap=cap, user_id=request.user.pk)
    form.is_valid()
    # Each valid field is applied and each invalid one reported in the panel, which the page
    # swaps in place: the person sees what was saved and what was not.
    error = forms.first_error(form) if form.errors else ""
    values = form.cleaned_data
    if values.get("model") is not None:
        chat.model = values["model"]
    if "limit_tool_iterations" in values:
        chat.limit_tool_iterations = values["limit_tool_iterations"]
    if values.get("max_tool_iterations") is not None:
        chat.max_tool_iterations = values["max_tool_iterations"]
    chat.save(update_fields=["model", "limit_tool_iterations", "max_tool_iterations", "updated_at"])
    context = {
        "chat": chat,
        "values": chat,
        "settings_url": reverse("chat:settings", args=[chat.pk]),
        **_model_context(chat),
        "cap": cap,
        "error": error,
        "saved": not error,
        "oob_name": True,
    }
    return render(request, "chat/_settings_panel.html", context)


@login_required
@require_POST
def draft_settings(request: AuthedRequest) -> HttpResponse:
    """The settings panel of a chat not created yet: checks the choices and shows them; the
    first message sends them along (nothing is stored before that)."""
    app = AppSettings.load()
    cap = app.max_tool_iterations_cap
    form = forms.ChatSettingsForm(request.POST, cap=cap, user_id=request.user.pk)
    form.is_valid()
    error = forms.first_error(form) if form.errors else ""
    values = form.cleaned_data
    default_steps = min(app.default_max_tool_iterations, cap)
    draft = _Draft(values.get("limit_tool_iterations", True), values.get("max_tool_iterations") or default_steps)
    context = {
        "chat": None,
        "values": draft,
        "settings_url": reverse("chat:draft_settings"),
        "models": enabled_models(request.user.pk),
        "current_model": values.get("model") or LLMModel.default(request.user.pk),
        "cap": cap,
        "error": error,
        "saved": not error,
        "oob_name": True,
    }
    return render(request, "chat/_settings_panel.html", context)
