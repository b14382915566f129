from __future__ import annotations

import json
from dataclasses import dataclass
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
from toolsets.files import attach

from . import branches, dom, forms, live, presenters
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


def _exchanges(
    chat: Chat, before: int | None = None, since: int | None = None
) -> tuple[list[dict[str, Any]], int | None]:
    """The exchanges of the branch the chat shows: the last PAGE_TURNS (before turn `before`,
    if given; or, with `since`, at least every one from that turn on), and the id to ask for
    the ones before them with, or None when there are none."""
    newest_first = branches.with_versions(chat.turns.filter(active=True)).order_by("-id")
    if before is not None:
        newest_first = newest_first.filter(pk__lt=before)
    size = PAGE_TURNS
    if since is not None:
        size = max(size, newest_first.filter(pk__gte=since).count())
    turns = list(newest_first[: size + 1])
    earlier = turns[size - 1].pk if len(turns) > size else None
    turns = turns[:size][::-1]
    return _exchange_views(turns, latest=turns[-1].pk if turns and before is None else None), earlier


def _exchange_views(turns: list[Turn], latest: int | None) -> list[dict[str, Any]]:
    views, asked = presenters.turn_views(turns)
    found = branches.versions(turns)
    exchanges = []
    for turn in turns:
        # Only the chat's latest answer can be continued (continue_answer checks it too).
        views[turn.pk]["can_continue"] = views[turn.pk]["can_continue"] and turn.pk == latest
        exchanges.append(presenters.exchange(turn.pk, asked.get(turn.pk), views[turn.pk], found.get(turn.pk)))
    return exchanges


def _models() -> Any:
    return LLMModel.objects.filter(enabled=True).only("id", "name", "model")


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
            "models": _models(),
            "current_model": LLMModel.default(),
            # The settings the chat the first message creates will have, chosen before it.
            "values": _Draft(True, min(app.default_max_tool_iterations, app.max_tool_iterations_cap)),
            "settings_url": reverse("chat:draft_settings"),
            "cap": app.max_tool_iterations_cap,
            **_popover_context(request, sel.clean(defaults.enabled_tools), reverse("chat:default_tools")),
        },
    )


@dataclass
class _Draft:
    """A new chat's settings before the chat exists (the panel shows them like a chat's)."""

    limit_tool_iterations: bool
    max_tool_iterations: int


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
            "values": chat,
            "settings_url": reverse("chat:settings", args=[chat.pk]),
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
    context = {"chat": chat, "exchanges": exchanges, "earlier": more, "models": _models()}
    return render(request, "chat/_earlier_page.html", context)


BUSY = "Wait for the current answer to finish, or stop it."


def _start_turn(
    chat: Chat,
    content: str,
    *,
    parent: Turn | None,
    model: LLMModel | None = None,
    metadata: dict[str, Any] | None = None,
) -> tuple[Message, Turn]:
    """A new exchange after `parent` (a new version of an exchange when `parent` already has
    one: `branches.choose` then shows it). Call with the chat's row locked."""
    with transaction.atomic():
        turn = Turn(chat=chat, model=model or chat.model or LLMModel.default(), parent=parent)
        turn.first_of_branch = parent is None
        turn.save()
        message = Message.objects.create(
            chat=chat, turn=turn, role=Message.Role.USER, content=content, metadata=metadata or {}
        )
        if not chat.title:
            chat.title = _title_from(content)
        chat.save(update_fields=["title", "updated_at"])
        transaction.on_commit(lambda: run_turn.delay(turn.pk))
    return message, turn


def _lock_idle(chat: Chat) -> bool:
    """Locks the chat's row (two clicks or two tabs cannot both start a turn); False if a turn
    is running in it. Call inside a transaction."""
    Chat.objects.select_for_update().filter(pk=chat.pk).first()
    return not chat.turns.filter(status__in=Turn.ACTIVE).exists()


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
    try:
        files = attach.claim(request.user.pk, request.POST.getlist("attachments"))
    except attach.Refused as exc:
        return HttpResponse(str(exc), status=400)
    if files and not content:
        return HttpResponse("Type a message to send with the files.", status=400)
    app = AppSettings.load()
    limit, steps = True, min(app.default_max_tool_iterations, app.max_tool_iterations_cap)
    if form.cleaned_data["settings"]:
        # The settings panel came along: what the person chose before the first message.
        settings_form = forms.ChatSettingsForm(request.POST, cap=app.max_tool_iterations_cap)
        if not settings_form.is_valid():
            return HttpResponse(forms.first_error(settings_form), status=400)
        limit = settings_form.cleaned_data["limit_tool_iterations"]
        steps = settings_form.cleaned_data["max_tool_iterations"] or steps
    chat = Chat.objects.create(
        owner=request.user,
        model=model or LLMModel.default(),
        enabled_tools=sel.clean(_defaults(request).enabled_tools),
        limit_tool_iterations=limit,
        max_tool_iterations=steps,
    )
    if content:
        with transaction.atomic():
            message, _ = _start_turn(chat, content, parent=None)
            attach.link(files, message)
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
    try:
        files = attach.claim(request.user.pk, request.POST.getlist("attachments"))
    except attach.Refused as exc:
        return HttpResponse(str(exc), status=400)
    had_title = bool(chat.title)
    with transaction.atomic():
        if not _lock_idle(chat):
            return HttpResponse(BUSY, status=409)
        message, turn = _start_turn(chat, content, parent=branches.last_turn(chat))
        attach.link(files, message)
    view = presenters.turn(turn.pk, status=turn.status, steps=[])
    exchange = presenters.exchange(turn.pk, message, view, None)
    html = render_to_string("chat/_exchange.html", {"chat": chat, "exchange": exchange, "models": _models()}, request)
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
        if not _lock_idle(chat):
            return HttpResponse(BUSY, status=409)
        latest = branches.last_turn(chat)
        if latest is None or latest.pk != turn.pk:
            return HttpResponse("Only the latest answer can be continued.", status=409)
        last = Message.objects.filter(turn=turn, role=Message.Role.ASSISTANT).order_by("-step", "-id").first()
        if turn.status != Turn.Status.COMPLETED or last is None or last.finish_reason != "length":
            return HttpResponse("This answer was not cut by the token limit.", status=400)
        message, new_turn = _start_turn(chat, CONTINUE_PROMPT, parent=turn, metadata={"continues": turn.pk})
    view = presenters.turn(new_turn.pk, status=new_turn.status, steps=[])
    exchange = presenters.exchange(new_turn.pk, message, view, None)
    html = render_to_string("chat/_exchange.html", {"chat": chat, "exchange": exchange, "models": _models()}, request)
    # The button under the answer that was continued goes away.
    cleared = f'<div class="turn-continue" id="{dom.continue_box(turn.pk)}" hx-swap-oob="true"></div>'
    return HttpResponse(html + cleared)


def _get_turn_for_user(request: AuthedRequest, turn_id: int) -> Turn:
    return get_object_or_404(Turn.objects.select_related("chat", "chat__model"), pk=turn_id, chat__owner=request.user)


def _question(turn: Turn) -> Message | None:
    return Message.objects.filter(turn=turn, role=Message.Role.USER, lane="").order_by("id").first()


def _branch_response(request: AuthedRequest, chat: Chat, focus: Turn) -> HttpResponse:
    """The chat's messages after a change of branch: every exchange from the changed one on
    (and the usual page before it), for #messages; the page keeps the versions switcher of the
    changed exchange where the reader's eyes were."""
    exchanges, earlier = _exchanges(chat, since=focus.pk)
    context = {"chat": chat, "exchanges": exchanges, "earlier": earlier, "models": _models()}
    response = render(request, "chat/_earlier_page.html", context)
    response["HX-Trigger-After-Settle"] = json.dumps({"tessera:branch": {"focus": dom.versions(focus.pk)}})
    return response


@login_required
@require_POST
def edit_message(request: AuthedRequest, turn_id: int) -> HttpResponse:
    """Sends an edited question as a new version of its exchange; the earlier version, with its
    answer and everything after it, stays as another branch."""
    turn = _get_turn_for_user(request, turn_id)
    form = forms.MessageForm(request.POST)
    if not form.is_valid():
        return HttpResponse(forms.first_error(form), status=400)
    question = _question(turn)
    if question is None or (question.metadata or {}).get("continues"):
        return HttpResponse("This message cannot be edited.", status=400)
    with transaction.atomic():
        if not _lock_idle(turn.chat):
            return HttpResponse(BUSY, status=409)
        message, new_turn = _start_turn(turn.chat, form.cleaned_data["content"], parent=turn.parent)
        attach.carry(question, message)
        branches.choose(new_turn)
    return _branch_response(request, turn.chat, new_turn)


@login_required
@require_POST
def regenerate(request: AuthedRequest, turn_id: int) -> HttpResponse:
    """Answers a question again, as a new version of its exchange: with the model the answer
    used, or the one chosen."""
    turn = _get_turn_for_user(request, turn_id)
    form = forms.RegenerateForm(request.POST)
    if not form.is_valid():
        return HttpResponse(forms.first_error(form), status=400)
    question = _question(turn)
    if question is None:
        return HttpResponse("This answer has no question to answer again.", status=400)
    with transaction.atomic():
        if not _lock_idle(turn.chat):
            return HttpResponse(BUSY, status=409)
        model = form.cleaned_data["model"] or (turn.model if turn.model and turn.model.enabled else None)
        message, new_turn = _start_turn(
            turn.chat, question.content, parent=turn.parent, model=model, metadata=question.metadata
        )
        attach.carry(question, message)
        branches.choose(new_turn)
    return _branch_response(request, turn.chat, new_turn)


@login_required
@require_POST
def choose_version(request: AuthedRequest, turn_id: int) -> HttpResponse:
    """Shows another version of an exchange, and below it the branch that version leads to."""
    turn = _get_turn_for_user(request, turn_id)
    with transaction.atomic():
        if not _lock_idle(turn.chat):
            return HttpResponse(BUSY, status=409)
        branches.choose(turn)
    return _branch_response(request, turn.chat, turn)


@login_required
@require_GET
def answer_markdown(request: AuthedRequest, turn_id: int) -> HttpResponse:
    """An answer's source, as the model wrote it (what Copy puts on the clipboard): Markdown,
    with a component block as its JSON."""
    turn = _get_turn_for_user(request, turn_id)
    texts = Message.objects.filter(turn=turn, lane="", role=Message.Role.ASSISTANT).order_by("step", "id")
    text = "\n\n".join(t.strip() for t in texts.values_list("content", flat=True) if t.strip())
    return HttpResponse(text, content_type="text/plain; charset=utf-8")


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
        "values": chat,
        "settings_url": reverse("chat:settings", args=[chat.pk]),
        "models": _models(),
        "current_model": chat.model or LLMModel.default(),
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
    form = forms.ChatSettingsForm(request.POST, cap=cap)
    form.is_valid()
    error = forms.first_error(form) if form.errors else ""
    values = form.cleaned_data
    default_steps = min(app.default_max_tool_iterations, cap)
    draft = _Draft(values.get("limit_tool_iterations", True), values.get("max_tool_iterations") or default_steps)
    context = {
        "chat": None,
        "values": draft,
        "settings_url": reverse("chat:draft_settings"),
        "models": _models(),
        "current_model": values.get("model") or LLMModel.default(),
        "cap": cap,
        "error": error,
        "saved": not error,
        "oob_name": True,
    }
    return render(request, "chat/_settings_panel.html", context)
