"""The composer's MCP controls: the `/` menu of the chat's servers' prompts (with an argument
form and `completion/complete` suggestions), using a prompt, and the resource picker.

Every view is the chat owner's only, and every server is one the chat selected and the user may
use (`prompts.sources`): a server an admin keeps from the user is never asked for anything. On
the home page (`chat_id` None, "new" in the address) the servers are those of the chat it would
create (the user's toolsets selection there); inserting a prompt with answered messages creates
that chat, while a resource or a prompt's question just goes to the composer, like an upload.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from functools import wraps
from typing import Any

from asgiref.sync import async_to_sync
from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.http import Http404, HttpResponse, JsonResponse
from django.shortcuts import render
from django.template.loader import render_to_string
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from chat import branches
from chat import views as chat_views
from chat.exchanges import BUSY, enabled_models, exchange_views, lock_idle, title_from
from chat.forms import NewChatForm, first_error
from chat.models import Chat, Message, Turn
from core.http import AuthedRequest
from core.redact import redact
from toolsets import availability
from toolsets.base import ToolFailure
from toolsets.files.views import file_json
from toolsets.mcp import prompts, resources
from toolsets.mcp.models import MCPServer
from toolsets.mcp.prompts import Prompt, Source

log = logging.getLogger(__name__)

MAX_QUERY = 200


@dataclass
class Scope:
    """The chat the composer writes to, or None on the home page, and the tools it selects."""

    chat: Chat | None
    tools: dict[str, list[str]]

    @property
    def pk(self) -> int | None:
        return self.chat.pk if self.chat else None


def _chat(request: AuthedRequest, chat_id: int | None) -> Scope:
    if chat_id is None:
        return Scope(None, chat_views.new_chat_tools(request))
    chat = Chat.objects.filter(pk=chat_id, owner=request.user).first()
    if chat is None:
        raise Http404
    return Scope(chat, chat.enabled_tools or {})


def _source(request: AuthedRequest, chat: Scope, slug: str) -> Source:
    found = prompts.source(request.user.pk, chat.tools, slug)
    if found is not None:
        return found
    server = MCPServer.objects.filter(slug=slug, enabled=True).first()
    state = availability.for_toolset(request.user.pk, server.toolset_id) if server else None
    if server is None or state is None or state.blocked_by_admin or not chat.tools.get(server.toolset_id):
        # Not selected, not allowed, or not there: the same answer, so nothing is learnt.
        raise Http404
    # The user's server, out of reach for now (unreachable, needs their key or connection).
    raise Unreachable(f"{server.name} is not available to you now ({state.reason}).", status=409)


def _error(message: str, status: int = 400) -> JsonResponse:
    return JsonResponse({"error": redact(message)}, status=status)


class Unreachable(Exception):
    """The server could not be asked what the request names (its list failed, or it is not
    available to the user now)."""

    def __init__(self, message: str, status: int = 502) -> None:
        super().__init__(message)
        self.status = status


def _answers_failures(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """A server that cannot be reached is a 502 with its reason, never a 500 nor a 404."""

    @wraps(view)
    def wrapped(request: AuthedRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        try:
            return view(request, *args, **kwargs)
        except Unreachable as exc:
            if request.method == "POST":
                return _error(str(exc), status=exc.status)
            return HttpResponse(redact(str(exc)), status=exc.status)

    return wrapped


# --- Prompts -----------------------------------------------------------------------------------


@login_required
@require_GET
def prompt_menu(request: AuthedRequest, chat_id: int | None) -> HttpResponse:
    """The listbox of prompts matching what follows the `/` (`q`)."""
    chat = _chat(request, chat_id)
    query = request.GET.get("q", "")[:MAX_QUERY].strip().lower()
    chosen = prompts.sources(request.user.pk, chat.tools)
    found, problems = async_to_sync(prompts.list_prompts)(chosen, request.user.pk)
    if query:
        found = [p for p in found if query in p.name.lower() or query in p.title.lower()]
    context = {"prompts": found, "problems": [redact(p) for p in problems], "query": query, "scope": chat.pk}
    return render(request, "toolsets/mcp/_prompt_menu.html", context)


def _prompt(request: AuthedRequest, chat: Scope, slug: str, name: str) -> tuple[Source, Prompt]:
    found = _source(request, chat, slug)
    listed, problems = async_to_sync(prompts.list_prompts)([found], request.user.pk)
    prompt = prompts.find_prompt(listed, slug, name)
    if prompt is None and problems:
        raise Unreachable(problems[0])
    if prompt is None:
        raise Http404
    return found, prompt


@login_required
@require_GET
@_answers_failures
def prompt_form(request: AuthedRequest, chat_id: int | None, slug: str) -> HttpResponse:
    chat = _chat(request, chat_id)
    _, prompt = _prompt(request, chat, slug, request.GET.get("name", ""))
    return render(request, "toolsets/mcp/_prompt_form.html", _form_context(chat, prompt, {}, {}))


def _form_context(chat: Scope, prompt: Prompt, values: dict[str, str], errors: dict[str, str]) -> dict[str, Any]:
    fields = [{"arg": a, "value": values.get(a.name, ""), "error": errors.get(a.name, "")} for a in prompt.arguments]
    return {"scope": chat.pk, "prompt": prompt, "fields": fields}


@login_required
@require_GET
@_answers_failures
def complete(request: AuthedRequest, chat_id: int | None, slug: str) -> HttpResponse:
    """Suggestions for one argument of a prompt (`prompt=`) or a resource template
    (`template=`), given what is typed (`value`) and the form's other values (`ctx.<name>`)."""
    chat = _chat(request, chat_id)
    found = _source(request, chat, slug)
    argument = request.GET.get("argument", "")
    value = request.GET.get("value", "")[: prompts.MAX_ARGUMENT_LENGTH]
    context: dict[str, str] = {
        k[4:]: str(v)[: prompts.MAX_ARGUMENT_LENGTH] for k, v in request.GET.items() if k.startswith("ctx.")
    }
    context.pop(argument, None)
    if request.GET.get("prompt"):
        _, prompt = _prompt(request, chat, slug, request.GET["prompt"])
        if argument not in {a.name for a in prompt.arguments}:
            return HttpResponse("That is not one of the prompt's arguments.", status=400)
        context = {k: v for k, v in context.items() if k in {a.name for a in prompt.arguments}}
        ref = {"type": "ref/prompt", "name": prompt.name}
    elif request.GET.get("template"):
        template = _find_template(request, found, request.GET["template"])
        if argument not in template.variables:
            return HttpResponse("That is not one of the template's variables.", status=400)
        context = {k: v for k, v in context.items() if k in template.variables}
        ref = {"type": "ref/resource", "uri": template.uri_template}
    else:
        return HttpResponse("Say which prompt or template to complete.", status=400)
    try:
        values = async_to_sync(prompts.complete)(found, request.user.pk, ref, argument, value, context)
    except ToolFailure as exc:
        log.info("Completion from %s failed: %s", found.server.name, exc)
        values = []  # suggestions are a help: a failing server just suggests nothing
    return render(request, "toolsets/mcp/_suggestions.html", {"values": values})


@login_required
@require_POST
@_answers_failures
def use_prompt(request: AuthedRequest, chat_id: int | None, slug: str) -> HttpResponse:
    """`prompts/get` with the form's arguments; its messages go into the conversation (answered
    ones as exchanges, the last question into the composer with its files as chips)."""
    chat = _chat(request, chat_id)
    found, prompt = _prompt(request, chat, slug, request.POST.get("name", ""))
    given = {a.name: request.POST.get(f"arg.{a.name}", "") for a in prompt.arguments}
    values, errors = prompts.check_arguments(prompt, given)
    if errors:
        form = render_to_string(
            "toolsets/mcp/_prompt_form.html",
            _form_context(chat, prompt, given, errors),
            request,
        )
        return JsonResponse({"error": "Check the highlighted values.", "form": form}, status=400)
    try:
        result = async_to_sync(prompts.get_prompt)(found, request.user.pk, prompt.name, values)
    except ToolFailure as exc:
        return _error(str(exc), status=502)
    try:
        runs = prompts.parts(found, request.user.pk, result)
    except resources.Unusable as exc:
        return _error(str(exc))
    if not runs:
        return _error(f"{found.server.name} returned no messages for {prompt.command}.", status=502)
    if chat.chat is None:
        return _into_new_chat(request, found, prompt, runs)
    with transaction.atomic():
        if not lock_idle(chat.chat):
            return _error(BUSY, status=409)
        inserted = insert(chat.chat, runs, {"server": found.slug, "prompt": prompt.name})
    html = ""
    if inserted.turns:
        made = branches.with_versions(Turn.objects.filter(pk__in=[t.pk for t in inserted.turns])).order_by("id")
        exchanges = exchange_views(list(made), latest=inserted.turns[-1].pk)
        models = enabled_models(request.user.pk)
        html = "".join(
            render_to_string("chat/_exchange.html", {"chat": chat.chat, "exchange": e, "models": models}, request)
            for e in exchanges
        )
    return JsonResponse({"html": html, "draft": inserted.draft, "files": [file_json(f) for f in inserted.files]})


def _into_new_chat(request: AuthedRequest, found: Source, prompt: Prompt, runs: list[prompts.Part]) -> HttpResponse:
    """On the home page: a prompt with answered messages starts the chat (with the model and
    settings the page shows, sent along) and the page continues on it; a prompt that only asks
    leaves its question in the composer, and the first message creates the chat as usual."""
    if not any(run.role == "assistant" for run in runs):
        question = insert(None, runs)  # no exchange to make: no chat is touched
        return JsonResponse({"html": "", "draft": question.draft, "files": [file_json(f) for f in question.files]})
    form = NewChatForm(request.POST, user_id=request.user.pk)
    if not form.is_valid():
        return _error(first_error(form))
    with transaction.atomic():
        try:
            chat = chat_views.new_chat(request, form)
        except chat_views.NotCreated as exc:
            return _error(str(exc))
        inserted = insert(chat, runs, {"server": found.slug, "prompt": prompt.name})
    return JsonResponse(
        {
            "redirect": reverse("chat:detail", args=[chat.pk]),
            "draft": inserted.draft,
            "files": [file_json(f) for f in inserted.files],
        }
    )


# --- Resources ---------------------------------------------------------------------------------


def _find_template(request: AuthedRequest, found: Source, uri_template: str) -> resources.Template:
    _, templates, problems = async_to_sync(resources.list_resources)([found], request.user.pk)
    template = next((t for t in templates if t.uri_template == uri_template), None)
    if template is None and problems:
        raise Unreachable(problems[0])
    if template is None:
        raise Http404
    return template


@login_required
@require_GET
def resource_picker(request: AuthedRequest, chat_id: int | None) -> HttpResponse:
    chat = _chat(request, chat_id)
    listed, templates, problems = async_to_sync(resources.list_resources)(
        prompts.sources(request.user.pk, chat.tools), request.user.pk
    )
    context: dict[str, Any] = {
        "scope": chat.pk,
        "resources": listed,
        "templates": templates,
        "problems": [redact(p) for p in problems],
    }
    return render(request, "toolsets/mcp/_resource_picker.html", context)


@login_required
@require_POST
@_answers_failures
def attach_resource(request: AuthedRequest, chat_id: int | None, slug: str) -> HttpResponse:
    """Reads a resource (`uri`, or a template `template` with `var.<name>` values) and stores
    its contents as the user's files, for the composer's chips."""
    chat = _chat(request, chat_id)
    found = _source(request, chat, slug)
    name = ""
    if request.POST.get("template"):
        template = _find_template(request, found, request.POST["template"])
        values = {v: request.POST.get(f"var.{v}", "") for v in template.variables}
        uri, errors = resources.expand(template, values)
        if errors:
            return JsonResponse({"error": " ".join(errors.values()), "fields": errors}, status=400)
        name = uri
    else:
        uri = request.POST.get("uri", "")
        if not resources.valid_uri(uri):
            return _error("That is not a resource address.")
        listed, _, problems = async_to_sync(resources.list_resources)([found], request.user.pk)
        match = next((r for r in listed if r.uri == uri), None)
        if match is None and problems:
            return _error(problems[0], status=502)
        if match is None:
            # Only what the server listed (a template's addresses come through its form).
            return _error(f"{found.server.name} does not list that resource.", status=404)
        name = match.name
    try:
        contents = async_to_sync(resources.read)(found, request.user.pk, uri)
        stored = resources.store(request.user.pk, found, uri, name, contents)
    except ToolFailure as exc:
        return _error(str(exc), status=502)
    except resources.Unusable as exc:
        return _error(str(exc), status=413 if "larger than" in str(exc) else 400)
    return JsonResponse({"files": [file_json(f) for f in stored]}, status=201)


# --- A prompt's messages in the conversation ---------------------------------------------------


@dataclass
class Inserted:
    turns: list[Any]  # chat.models.Turn, completed exchanges made of the prompt's messages
    draft: str  # the prompt's last user text, for the composer (the user edits, then sends)
    files: list[Any]  # that text's files, not yet on a message (the composer's chips)


def insert(chat: Any, runs: list[prompts.Part], origin: dict[str, str] | None = None) -> Inserted:
    """Each user run answered by an assistant run becomes a completed exchange of the chat (no
    model call: the server wrote both sides; `origin`, the server and prompt, is kept on the
    question); a last, unanswered user run goes to the composer. Call inside a transaction with
    the chat locked idle (`chat.exchanges.lock_idle`)."""
    from toolsets.files import attach

    turns: list[Any] = []
    pending: prompts.Part | None = None
    for run in runs:
        if run.role == "user":
            if pending is not None:  # two user runs cannot happen (runs alternate); defensive
                pending.text += run.text
                pending.files += run.files
            else:
                pending = run
            continue
        question = pending or prompts.Part("user", [], [])
        pending = None
        model, _ = chat.next_model()
        turn = Turn.objects.create(chat=chat, model=model, status=Turn.Status.COMPLETED)
        asked = Message.objects.create(
            chat=chat,
            turn=turn,
            role=Message.Role.USER,
            content="\n\n".join(question.text).strip() or "…",
            metadata={"mcp_prompt": origin or {}},
        )
        attach.link(question.files, asked)
        answer = "\n\n".join(run.text).strip()
        if run.files:
            names = ", ".join(f.name for f in run.files)
            answer += f"\n\n(The prompt's answer carried files, attached to the question above: {names}.)"
            attach.link(run.files, asked)
        Message.objects.create(
            chat=chat, turn=turn, role=Message.Role.ASSISTANT, content=answer, step=0, finish_reason="stop"
        )
        turns.append(turn)
    if turns and not chat.title:
        chat.title = title_from(Message.objects.filter(turn=turns[0], role="user").values_list("content", flat=True)[0])
        chat.save(update_fields=["title", "updated_at"])
    if pending is None:
        return Inserted(turns, "", [])
    return Inserted(turns, "\n\n".join(pending.text).strip(), pending.files)
