from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseClientRedirect

from core.http import AuthedRequest

from . import dom, forms, live, presenters
from . import selection as sel
from .models import AppSettings, Chat, LLMModel, Message, Turn, UserChatDefaults
from .prompts import CONTINUE_PROMPT
from .tasks import run_turn

TITLE_LENGTH = 60
# A chat page shows this many exchanges; older ones load as the reader scrolls up. A long chat
# then costs a page view what a short one does.
PAGE_TURNS = 30


def _get_chat_for_user(request: AuthedRequest, chat_id: int) -> Chat:
    """Every chat lookup goes through here: another user's chat is a 404, never a 403."""
    return get_object_or_404(Chat.objects.select_related("model"), pk=chat_id, owner=request.user)


def _sidebar_chats(request: AuthedRequest) -> Any:
    return Chat.objects.filter(owner=request.user).only("id", "title", "updated_at")[:100]


def _exchanges(chat: Chat, before: int | None = None) -> tuple[list[dict[str, Any]], int | None]:
    """The last PAGE_TURNS exchanges (before turn `before`, if given), and the id to ask for the
    ones before them with, or None when there are none."""
    newest_first = chat.turns.order_by("-id")
    if before is not None:
        newest_first = newest_first.filter(pk__lt=before)
    turns = list(newest_first[: PAGE_TURNS + 1])
    earlier = turns[PAGE_TURNS - 1].pk if len(turns) > PAGE_TURNS else None
    turns = turns[:PAGE_TURNS][::-1]
    views, asked = presenters.turn_views(turns)
    # Only the chat's latest answer can be continued (continue_answer checks it too).
    latest = turns[-1].pk if turns and before is None else None
    for turn in turns:
        views[turn.pk]["can_continue"] = views[turn.pk]["can_continue"] and turn.pk == latest
    exchanges = [{"user_message": asked.get(turn.pk), "turn": views[turn.pk]} for turn in turns]
    return exchanges, earlier


def _models() -> Any:
    return LLMModel.objects.filter(enabled=True).only("id", "name", "model")


@login_required
@require_GET
def home(request: AuthedRequest) -> HttpResponse:
    defaults = _defaults(request)
    return render(
        request,
        "chat/page.html",
        {
            "chat": None,
            "chats": _sidebar_chats(request),
            "exchanges": [],
            "models": _models(),
            "current_model": LLMModel.default(),
            **_popover_context(request, sel.clean(defaults.enabled_tools), reverse("chat:default_tools")),
        },
    )


@login_required
@require_GET
def chat_detail(request: AuthedRequest, chat_id: int) -> HttpResponse:
    chat = _get_chat_for_user(request, chat_id)
    exchanges, earlier = _exchanges(chat)
    return render(
        request,
        "chat/page.html",
        {
            "chat": chat,
            "chats": _sidebar_chats(request),
            "exchanges": exchanges,
            "earlier": earlier,
            "models": _models(),
            "current_model": chat.model or LLMModel.default(),
            "cap": AppSettings.load().max_tool_iterations_cap,
            **_popover_context(request, sel.clean(chat.enabled_tools), reverse("chat:tools", args=[chat.pk])),
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
    exchanges, more = _exchanges(chat, before)
    return render(request, "chat/_earlier_page.html", {"chat": chat, "exchanges": exchanges, "earlier": more})


def _start_turn(chat: Chat, content: str) -> tuple[Message, Turn]:
    with transaction.atomic():
        turn = Turn.objects.create(chat=chat, model=chat.model or LLMModel.default())
        message = Message.objects.create(chat=chat, turn=turn, role=Message.Role.USER, content=content)
        if not chat.title:
            chat.title = _title_from(content)
        chat.save(update_fields=["title", "updated_at"])
        transaction.on_commit(lambda: run_turn.delay(turn.pk))
    return message, turn


def _title_from(content: str) -> str:
    line = " ".join(content.split())
    return line if len(line) <= TITLE_LENGTH else line[: TITLE_LENGTH - 1].rstrip() + "…"


@login_required
@require_POST
def create_chat(request: AuthedRequest) -> HttpResponse:
    """Creates a chat from the first message typed on the home page."""
    form = forms.NewChatForm(request.POST)
    if not form.is_valid():
        return HttpResponse(forms.first_error(form), status=400)
    content, model = form.cleaned_data["content"], form.cleaned_data["model"]
    app = AppSettings.load()
    chat = Chat.objects.create(
        owner=request.user,
        model=model or LLMModel.default(),
        enabled_tools=sel.clean(_defaults(request).enabled_tools),
        max_tool_iterations=min(app.default_max_tool_iterations, app.max_tool_iterations_cap),
    )
    if content:
        _start_turn(chat, content)
    url = reverse("chat:detail", args=[chat.pk])
    if request.htmx:
        return HttpResponseClientRedirect(url)
    return redirect(url)


@login_required
@require_POST
def send_message(request: AuthedRequest, chat_id: int) -> HttpResponse:
    chat = _get_chat_for_user(request, chat_id)
    form = forms.MessageForm(request.POST)
    if not form.is_valid():
        return HttpResponse(forms.first_error(form), status=400)
    content = form.cleaned_data["content"]
    if chat.turns.filter(status__in=Turn.ACTIVE).exists():
        return HttpResponse("Wait for the current answer to finish, or stop it.", status=409)
    had_title = bool(chat.title)
    message, turn = _start_turn(chat, content)
    view = presenters.turn(turn.pk, status=turn.status, steps=[])
    html = render_to_string("chat/_exchange.html", {"exchange": {"user_message": message, "turn": view}}, request)
    if not had_title:
        html += render_to_string("chat/_chat_link.html", {"item": chat, "chat": chat, "oob": True}, request)
    return HttpResponse(html)


@login_required
@require_POST
def continue_answer(request: AuthedRequest, turn_id: int) -> HttpResponse:
    """Starts a turn that continues an answer cut by the token limit: the chat's latest turn,
    finished, whose last model call ended with finish_reason "length"."""
    turn = get_object_or_404(Turn.objects.select_related("chat"), pk=turn_id, chat__owner=request.user)
    chat = turn.chat
    with transaction.atomic():
        # Locked, so two clicks (or two tabs) cannot both start a turn.
        Chat.objects.select_for_update().filter(pk=chat.pk).first()
        if chat.turns.filter(status__in=Turn.ACTIVE).exists():
            return HttpResponse("Wait for the current answer to finish, or stop it.", status=409)
        if chat.turns.order_by("-id").values_list("pk", flat=True).first() != turn.pk:
            return HttpResponse("Only the latest answer can be continued.", status=409)
        last = Message.objects.filter(turn=turn, role=Message.Role.ASSISTANT).order_by("-step", "-id").first()
        if turn.status != Turn.Status.COMPLETED or last is None or last.finish_reason != "length":
            return HttpResponse("This answer was not cut by the token limit.", status=400)
        message, new_turn = _start_turn(chat, CONTINUE_PROMPT)
        message.metadata = {"continues": turn.pk}
        message.save(update_fields=["metadata"])
    view = presenters.turn(new_turn.pk, status=new_turn.status, steps=[])
    html = render_to_string("chat/_exchange.html", {"exchange": {"user_message": message, "turn": view}}, request)
    # The button under the answer that was continued goes away.
    cleared = f'<div class="turn-continue" id="{dom.continue_box(turn.pk)}" hx-swap-oob="true"></div>'
    return HttpResponse(html + cleared)


@login_required
@require_POST
def stop(request: AuthedRequest, chat_id: int) -> HttpResponse:
    chat = _get_chat_for_user(request, chat_id)
    for turn in chat.turns.filter(status__in=Turn.ACTIVE):
        # A queued turn has no worker to tell: close it here. A running one stops itself.
        if Turn.cancel_if_queued(turn.pk):
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


def _popover_context(request: AuthedRequest, selection: sel.Selection, tools_url: str, **extra: Any) -> dict[str, Any]:
    rows = sel.popover_rows(request.user.pk, selection)
    return {"rows": rows, "badge": sel.badge_count(rows), "tools_url": tools_url, **extra}


def _save_tools(request: AuthedRequest, previous: sel.Selection, tools_url: str, chat: Chat | None) -> HttpResponse:
    rows = sel.popover_rows(request.user.pk, previous)
    usable = sel.usable_keys(rows)
    selection = sel.from_form(request.POST.getlist("tools"), previous, usable)
    if chat is not None:
        chat.enabled_tools = selection
        chat.save(update_fields=["enabled_tools", "updated_at"])
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
    form = forms.ChatSettingsForm(request.POST, cap=cap)
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
        "models": _models(),
        "current_model": chat.model or LLMModel.default(),
        "cap": cap,
        "error": error,
        "saved": not error,
    }
    return render(request, "chat/_settings_panel.html", context)
