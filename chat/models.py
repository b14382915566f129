from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator
from django.db import models
from django.db.models import Q
from django.db.models.signals import m2m_changed, post_delete, post_save
from django.dispatch import receiver
from django.utils import timezone

from core import groups as member_groups
from core.crypto import EncryptedTextField, mask

DEMO_MODEL = "demo/tessera"
GROUPS_HELP = "Only members of these groups may use it; none chosen: everyone."


def open_to(model: type[models.Model], user_id: int | None) -> Q:
    """Rows of `model` (with a `groups` field) open to the user: limited to no group, or to one of
    theirs. Subqueries rather than a join, so a row in two of the user's groups comes once."""
    through = model._meta.get_field("groups").remote_field.through  # type: ignore[union-attr]
    column = f"{model._meta.model_name}_id"
    limited = through.objects.values(column)
    # The user's groups as a subquery too: the whole check is part of the caller's one query.
    user_groups = member_groups.user_groups().filter(user_id=user_id).values("group_id")
    mine = through.objects.filter(group_id__in=user_groups).values(column)
    return ~Q(pk__in=limited) | Q(pk__in=mine)


class LLMModel(models.Model):
    """A model an admin makes available. Any LiteLLM model string works."""

    name = models.CharField("display name", max_length=100)
    model = models.CharField(
        "LiteLLM model",
        max_length=200,
        help_text="e.g. openai/gpt-4o, anthropic/claude-sonnet-4-5, ollama_chat/llama3.1, "
        "or openai/<name> with an API base for any OpenAI-compatible server.",
    )
    api_base = models.URLField("API base", blank=True, max_length=500)
    api_key = EncryptedTextField("API key", blank=True)
    enabled = models.BooleanField(default=True)
    is_default = models.BooleanField(
        "default", default=False, help_text="Used for new chats. Without one, the newest enabled model is used."
    )
    extra_params = models.JSONField(
        default=dict, blank=True, help_text='Passed to LiteLLM as is, e.g. {"temperature": 0.2}.'
    )
    context_window = models.PositiveIntegerField(
        "context window",
        null=True,
        blank=True,
        help_text="Input tokens the model takes. Empty: from LiteLLM's model information.",
    )
    answer_reserve = models.PositiveIntegerField(
        "answer reserve",
        null=True,
        blank=True,
        help_text="Tokens of the context window kept free for the answer. Empty: the answer length "
        "asked for in the extra parameters (max_tokens), else the model's, at most 4096.",
    )
    groups = models.ManyToManyField("auth.Group", blank=True, related_name="llm_models", help_text=GROUPS_HELP)
    # For budgets: the admin's price wins; without one, LiteLLM's price list; without that, free.
    input_price = models.DecimalField(
        "input price (USD per million tokens)",
        max_digits=12,
        decimal_places=4,
        null=True,
        blank=True,
        validators=[MinValueValidator(0)],
        help_text="For budgets, when LiteLLM has no price for this model (or to override it).",
    )
    output_price = models.DecimalField(
        "output price (USD per million tokens)",
        max_digits=12,
        decimal_places=4,
        null=True,
        blank=True,
        validators=[MinValueValidator(0)],
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        verbose_name = "LLM model"
        constraints = [
            models.UniqueConstraint(fields=["is_default"], condition=Q(is_default=True), name="one_default_model")
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def masked_key(self) -> str:
        return mask(self.api_key)

    @property
    def is_demo(self) -> bool:
        return self.model.startswith("demo/")

    @classmethod
    def for_user(cls, user_id: int | None) -> models.QuerySet[LLMModel]:
        """The enabled models this user may choose: the picker's list and the forms' choices."""
        return cls.objects.filter(enabled=True).filter(open_to(cls, user_id))

    def open_to(self, user_id: int | None) -> bool:
        return LLMModel.for_user(user_id).filter(pk=self.pk).exists()

    @classmethod
    def default(cls, user_id: int | None = None) -> LLMModel | None:
        """The default among the models open to `user_id` (one query)."""
        return cls.choose_default(list(cls.for_user(user_id)))

    @staticmethod
    def choose_default(models: list[LLMModel]) -> LLMModel | None:
        """Of these (enabled) models: the explicit default; else the newest real one; else the
        first (the offline demo)."""
        real = [m for m in models if not m.is_demo]
        return (
            next((m for m in models if m.is_default), None)
            or max(real, key=lambda m: m.created_at, default=None)
            or (models[0] if models else None)
        )

    def litellm_kwargs(self) -> dict[str, Any]:
        extra = dict(self.extra_params or {})
        if self.is_demo and "tokens_per_second" not in extra:
            extra["tokens_per_second"] = settings.TESSERA["DEMO_TOKENS_PER_SECOND"]
        return extra


class Chat(models.Model):
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="chats")
    title = models.CharField(max_length=200, blank=True)
    model = models.ForeignKey(LLMModel, null=True, blank=True, on_delete=models.SET_NULL, related_name="chats")
    # {toolset_id: [tool names]}; the tools the agent may use in this chat.
    enabled_tools = models.JSONField(default=dict, blank=True)
    limit_tool_iterations = models.BooleanField(default=True)
    max_tool_iterations = models.PositiveSmallIntegerField(default=5)
    # False for a conversation held through the OpenAI-compatible API that its caller did not
    # ask to keep: its turns are stored (audit, usage) but it is not in the chat list.
    listed = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-updated_at", "-id"]
        indexes = [models.Index(fields=["owner", "-updated_at"])]

    def __str__(self) -> str:
        return self.title or "New chat"

    def next_model(self, open_models: list[LLMModel] | None = None) -> tuple[LLMModel | None, str]:
        """The model the chat's next message uses, and the name of the chat's own model when
        the owner lost it ("" otherwise): then the owner's default takes its place.
        `open_models`: the models open to the owner, when the caller has them (no query)."""
        models = open_models if open_models is not None else list(LLMModel.for_user(self.owner_id))
        own = self.model
        if own is not None and any(m.pk == own.pk for m in models):
            return own, ""
        return LLMModel.choose_default(models), own.name if own is not None else ""

    @property
    def display_title(self) -> str:
        return self.title or "New chat"


class AppSettings(models.Model):
    """Site-wide settings an admin edits in Django admin (a single row)."""

    default_max_tool_iterations = models.PositiveSmallIntegerField(
        default=5, help_text="Tool steps per answer for new chats."
    )
    max_tool_iterations_cap = models.PositiveSmallIntegerField(
        default=25, help_text="The most tool steps per answer any chat may allow."
    )
    max_delegation_depth = models.PositiveSmallIntegerField(
        default=1, help_text="How deep subagents may delegate: 1 lets the assistant delegate, subagents not."
    )
    openai_api = models.BooleanField(
        "OpenAI-compatible API",
        default=False,
        help_text=(
            "Serve /v1/models and /v1/chat/completions to API tokens: Tessera's agent loop, with each "
            "user's tools and policies, for any OpenAI client."
        ),
    )
    mcp_server = models.BooleanField(
        "MCP server",
        default=False,
        help_text=(
            "Serve Tessera's tools and agents at /mcp to API tokens: any MCP client (Claude Desktop, IDEs, "
            "agent frameworks) under the same policies, limits and audit as the chat."
        ),
    )
    # What each endpoint exposes: toolset ids and agent ids; empty means all of them.
    openai_api_toolsets = models.JSONField("toolsets over the OpenAI-compatible API", default=list, blank=True)
    openai_api_agents = models.JSONField("agents over the OpenAI-compatible API", default=list, blank=True)
    mcp_server_toolsets = models.JSONField("toolsets over MCP", default=list, blank=True)
    mcp_server_agents = models.JSONField("agents over MCP", default=list, blank=True)
    trace_content = models.BooleanField(
        default=False,
        help_text=(
            "When traces are exported (OpenTelemetry), include prompts and answers in model-call spans "
            "(secrets redacted). Off: spans carry counts, models and timings only."
        ),
    )
    summary_model = models.ForeignKey(
        LLMModel,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="Writes the running summary of a chat too long for its model. Empty: the chat's model.",
    )
    tool_catalogue_count = models.PositiveSmallIntegerField(
        default=30,
        help_text="Past this many selected tools, the model gets a catalogue and a find-tools tool "
        "instead of every definition. 0: never.",
    )
    tool_catalogue_tokens = models.PositiveIntegerField(
        default=6000,
        help_text="Past this many tokens of tool definitions, the same. 0: never.",
    )
    public_shares = models.BooleanField(
        "public share links",
        default=False,
        help_text=(
            "Let people share a chat with anyone who has the link, without signing in. "
            "Off: shared chats are visible to signed-in users of this site only."
        ),
    )

    class Meta:
        verbose_name = verbose_name_plural = "app settings"

    def __str__(self) -> str:
        return "App settings"

    CACHE_KEY = "app-settings"

    @classmethod
    def load(cls) -> AppSettings:
        # Read on every chat page and every turn, changed rarely: kept in the shared cache,
        # which saving or deleting the row clears for every process at once (see below).
        obj = cache.get(cls.CACHE_KEY)
        if obj is None:
            obj, _ = cls.objects.get_or_create(pk=1)
            cache.set(cls.CACHE_KEY, obj)
        return obj  # type: ignore[no-any-return]

    def exposes(self, endpoint: str, kind: str, item: str) -> bool:
        """Whether `endpoint` ("openai_api", "mcp_server") offers toolset or agent `item`."""
        chosen = getattr(self, f"{endpoint}_{kind}") or []
        return not chosen or item in chosen

    def effective_iterations(self, chat: Chat) -> int:
        """The limit a turn runs with: the chat's own number when its limit is on, else the cap."""
        cap = max(1, self.max_tool_iterations_cap)
        return min(chat.max_tool_iterations, cap) if chat.limit_tool_iterations else cap


class UserChatDefaults(models.Model):
    """What a user's next new chat starts with: their last tool selection."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="chat_defaults")
    enabled_tools = models.JSONField(default=dict, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"Chat defaults of {self.user}"


class Turn(models.Model):
    """One run of the agent: from a user message to the final answer (or stop, or failure)."""

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        COMPLETED = "completed", "Completed"
        FAILED = "failed", "Failed"
        CANCELLED = "cancelled", "Stopped"
        INTERRUPTED = "interrupted", "Interrupted"

    ACTIVE = (Status.QUEUED, Status.RUNNING)

    chat = models.ForeignKey(Chat, on_delete=models.CASCADE, related_name="turns")
    model = models.ForeignKey(LLMModel, null=True, on_delete=models.SET_NULL, related_name="+")
    # Branches: a turn follows `parent` (the exchange before it; none for a chat's first).
    # Turns with the same parent are versions of one exchange (an edited question, or a
    # regenerated answer); `chosen` marks the version shown among its siblings, and `active`
    # every turn of the branch the chat shows now, so loading it is one indexed filter.
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.CASCADE, related_name="children")
    chosen = models.BooleanField(default=True)
    active = models.BooleanField(default=True)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.QUEUED, db_index=True)
    iterations = models.PositiveSmallIntegerField(default=0)
    error = models.TextField(blank=True)
    error_kind = models.CharField(max_length=40, blank=True)
    notices = models.JSONField(default=list, blank=True)
    usage = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    first_token_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # A turn sent through the OpenAI-compatible API: the caller's conversation (OpenAI format),
    # its system text, its own tools (returned to it as tool calls) and the agent it asked for.
    api = models.JSONField(default=dict, blank=True)
    # The OpenTelemetry trace the turn belongs to (32 hex digits), when traces are on.
    trace_id = models.CharField(max_length=32, blank=True, default="")

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["chat", "active", "id"], name="chat_turn_branch")]

    def __str__(self) -> str:
        return f"Turn {self.pk} ({self.status})"

    # Set on a turn about to be saved as a new version of a chat's first exchange (no parent on
    # purpose); any other new turn without a parent follows the end of the branch shown.
    first_of_branch = False

    def save(self, *args: Any, **kwargs: Any) -> None:
        if self._state.adding and self.parent_id is None and not self.first_of_branch:
            shown = Turn.objects.filter(chat_id=self.chat_id, active=True).order_by("-id")
            self.parent_id = shown.values_list("pk", flat=True).first()
        super().save(*args, **kwargs)

    @property
    def is_active(self) -> bool:
        return self.status in self.ACTIVE

    # --- status transitions -------------------------------------------------------------------
    # Each is one conditional UPDATE (or a row lock), so of two processes racing for the same
    # transition exactly one wins: a turn is claimed once and closed once.

    @classmethod
    def claim(cls, pk: int) -> Turn | None:
        """queued → running, for the worker that will run it; None if it was not queued."""
        if not cls.objects.filter(pk=pk, status=cls.Status.QUEUED).update(
            status=cls.Status.RUNNING, started_at=timezone.now()
        ):
            return None
        return cls.objects.select_related("chat", "chat__owner", "model").get(pk=pk)

    @classmethod
    def cancel_if_queued(cls, pk: int) -> bool:
        """queued → cancelled (Stop before any worker took it)."""
        return bool(cls.objects.filter(pk=pk, status=cls.Status.QUEUED).update(status=cls.Status.CANCELLED))

    @classmethod
    def lock_running(cls, pk: int) -> Turn | None:
        """The turn, row-locked, if it is still running (call inside a transaction)."""
        return cls.objects.select_for_update().filter(pk=pk, status=cls.Status.RUNNING).first()

    def close(self, status: str, **fields: Any) -> bool:
        """running → a final status, with what the run produced (error, usage, notices…).
        False, and nothing changed, if the turn was not running any more (e.g. the reaper
        closed it as interrupted while its worker was stalled)."""
        fields.setdefault("finished_at", timezone.now())
        if not type(self).objects.filter(pk=self.pk, status=self.Status.RUNNING).update(status=status, **fields):
            return False
        self.status = status
        for name, value in fields.items():
            setattr(self, name, value)
        return True


class Message(models.Model):
    class Role(models.TextChoices):
        SYSTEM = "system", "System"
        USER = "user", "User"
        ASSISTANT = "assistant", "Assistant"
        TOOL = "tool", "Tool"

    chat = models.ForeignKey(Chat, on_delete=models.CASCADE, related_name="messages")
    turn = models.ForeignKey(Turn, null=True, blank=True, on_delete=models.CASCADE, related_name="messages")
    step = models.PositiveSmallIntegerField(null=True, blank=True)
    # A subagent's message: the path of the delegation call it belongs to ("step-position", or
    # "0-1/2-0" a level deeper); empty for the turn's own. A subagent's transcript is kept for its
    # card, never sent to the supervisor's provider.
    lane = models.CharField(max_length=100, blank=True, default="")
    role = models.CharField(max_length=10, choices=Role.choices)
    content = models.TextField(blank=True)
    # OpenAI shape on assistant messages: [{"id", "type": "function", "function": {"name", "arguments"}}]
    tool_calls = models.JSONField(null=True, blank=True)
    # Text: some providers' ids carry state (Gemini's a signature) and run long.
    tool_call_id = models.TextField(blank=True)
    # e.g. {"stopped": true}, {"failed": true}
    metadata = models.JSONField(default=dict, blank=True)
    # An assistant message is one model call: what it cost, as the provider (or LiteLLM's count)
    # reported it (null: no figure), and why it ended ("stop", "tool_calls", "length"…).
    prompt_tokens = models.PositiveIntegerField(null=True, blank=True)
    completion_tokens = models.PositiveIntegerField(null=True, blank=True)
    finish_reason = models.CharField(max_length=40, blank=True, default="")
    # An assistant message's rendered HTML, kept so a page view does not run Markdown again;
    # valid only while `html_key` matches chat.rendering.fingerprint().
    html = models.TextField(blank=True, default="")
    html_key = models.CharField(max_length=16, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["chat", "id"])]

    def __str__(self) -> str:
        return f"{self.role}: {self.content[:40]}"

    def to_openai(self) -> dict[str, Any]:
        """The message exactly as a provider expects it back."""
        data: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.role == self.Role.ASSISTANT:
            data["content"] = self.content or None
            if self.tool_calls:
                data["tool_calls"] = self.tool_calls
        if self.role == self.Role.TOOL:
            data["tool_call_id"] = self.tool_call_id
        return data


class ContextSummary(models.Model):
    """A running summary of a chat's earlier exchanges, written when the chat outgrew its
    model's context. `key` hashes the part of the conversation it covers, so every later request
    over the same part finds it again (chat.agent.context); the chat itself is never changed."""

    chat = models.ForeignKey(Chat, on_delete=models.CASCADE, related_name="context_summaries")
    key = models.CharField(max_length=64)
    # How many messages (after the system prompt) it covers.
    covered = models.PositiveIntegerField()
    content = models.TextField()
    model = models.CharField(max_length=200, blank=True)
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        constraints = [models.UniqueConstraint(fields=["chat", "key"], name="one_summary_per_span")]

    def __str__(self) -> str:
        return f"Summary of {self.covered} messages of chat {self.chat_id}"


class TokenUsage(models.Model):
    """Each user's running token total over every model call of their turns. A ledger rather
    than a sum over messages: deleting a chat does not give its tokens back."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="token_usage")
    prompt_tokens = models.PositiveBigIntegerField(default=0)
    completion_tokens = models.PositiveBigIntegerField(default=0)
    model_calls = models.PositiveIntegerField(default=0)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-prompt_tokens"]
        verbose_name = verbose_name_plural = "token usage"

    def __str__(self) -> str:
        return f"Token usage of {self.user}"

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @classmethod
    def record(cls, user_id: int, prompt_tokens: int, completion_tokens: int) -> None:
        """Adds one model call, atomically (turns of one user may finish at the same moment)."""
        from django.db import IntegrityError, transaction
        from django.db.models import F
        from django.utils import timezone

        changes = {
            "prompt_tokens": F("prompt_tokens") + prompt_tokens,
            "completion_tokens": F("completion_tokens") + completion_tokens,
            "model_calls": F("model_calls") + 1,
            "updated_at": timezone.now(),
        }
        if cls.objects.filter(user_id=user_id).update(**changes):
            return
        try:
            with transaction.atomic():
                cls.objects.create(
                    user_id=user_id, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens, model_calls=1
                )
        except IntegrityError:  # another turn created the row first
            cls.objects.filter(user_id=user_id).update(**changes)


class Budget(models.Model):
    """A spending limit for one user, or for the members of one group together, per day or per
    calendar month (UTC): in money and/or tokens. Checked before every model call (chat/budgets.py)."""

    class Period(models.TextChoices):
        DAY = "day", "Per day"
        MONTH = "month", "Per month"

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE, related_name="budgets"
    )
    group = models.ForeignKey(
        "auth.Group",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="budgets",
        help_text="The members' spending counts together against this limit.",
    )
    period = models.CharField(max_length=10, choices=Period.choices, default=Period.MONTH)
    max_cost = models.DecimalField(
        "spending limit (USD)",
        max_digits=12,
        decimal_places=4,
        null=True,
        blank=True,
        validators=[MinValueValidator(0)],
    )
    max_tokens = models.PositiveBigIntegerField("token limit", null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(user__isnull=True, group__isnull=False) | Q(user__isnull=False, group__isnull=True),
                name="budget_for_a_user_or_a_group",
            )
        ]

    def __str__(self) -> str:
        who = f"group {self.group}" if self.group_id else f"user {self.user}"
        return f"{self.get_period_display()} for {who}"

    def clean(self) -> None:
        if (self.user_id is None) == (self.group_id is None):
            raise ValidationError("Choose a user or a group (one of them).")
        if self.max_cost is None and self.max_tokens is None:
            raise ValidationError("Set a spending limit, a token limit, or both.")


class Spend(models.Model):
    """One model call's usage and price: the ledger budgets start from and admins report on."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="spend")
    model = models.ForeignKey(LLMModel, null=True, on_delete=models.SET_NULL, related_name="+")
    model_name = models.CharField(max_length=200)
    prompt_tokens = models.PositiveBigIntegerField(default=0)
    completion_tokens = models.PositiveBigIntegerField(default=0)
    cost = models.DecimalField("cost (USD)", max_digits=14, decimal_places=6, default=0)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name = verbose_name_plural = "spend"

    def __str__(self) -> str:
        return f"{self.model_name}: {self.prompt_tokens + self.completion_tokens} tokens"


class ChatShare(models.Model):
    """A read-only link to a snapshot of a chat: the exchanges of the branch on screen when it
    was shared (later messages and other branches are not in it)."""

    chat = models.ForeignKey(Chat, on_delete=models.CASCADE, related_name="shares")
    token = models.CharField(max_length=64, unique=True)
    title = models.CharField(max_length=200, blank=True)
    # The turns of the branch shown when shared, oldest first.
    turn_ids = models.JSONField(default=list)
    # Anyone with the link (when the admin allows public links); else signed-in users only.
    public = models.BooleanField(default=False)
    include_files = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "shared chat"

    def __str__(self) -> str:
        return self.title or "New chat"

    @property
    def display_title(self) -> str:
        return self.title or "New chat"


class AgentDefinition(models.Model):
    """A subagent an admin defines; built-in agents are code (chat/agents/)."""

    name = models.CharField(max_length=60)
    slug = models.SlugField(
        max_length=40,
        unique=True,
        help_text="The model calls it as delegate_to_<slug>: lowercase letters, digits and underscores.",
    )
    description = models.CharField(max_length=300, help_text="What it is good at (the model reads this).")
    instructions = models.TextField(help_text="Its system prompt.")
    model = models.ForeignKey(
        LLMModel, null=True, blank=True, on_delete=models.SET_NULL, help_text="Empty: the chat's model."
    )
    toolsets = models.JSONField(
        default=list, blank=True, help_text='Toolset ids it may use, e.g. ["web", "exa"]; empty: none.'
    )
    max_iterations = models.PositiveSmallIntegerField(default=5)
    enabled = models.BooleanField(default=True)
    groups = models.ManyToManyField("auth.Group", blank=True, related_name="agents", help_text=GROUPS_HELP)

    class Meta:
        ordering = ["name"]
        verbose_name = "agent"

    def __str__(self) -> str:
        return self.name

    CACHE_KEY = "agent-definitions"
    # Filled in by enabled_rows(), for the cached copies.
    group_ids: frozenset[int] = frozenset()

    @classmethod
    def enabled_rows(cls) -> list[AgentDefinition]:
        # Read on every chat page (the tools popover) and turn; changed rarely: cached, and
        # cleared for every process when a row is saved or deleted (see below).
        rows = cache.get(cls.CACHE_KEY)
        if rows is None:
            rows = list(cls.objects.filter(enabled=True).prefetch_related("groups"))
            for row in rows:
                # Kept with the cached row: the group ids, read without a query per turn.
                row.group_ids = frozenset(group.pk for group in row.groups.all())
            cache.set(cls.CACHE_KEY, rows)
        return rows  # type: ignore[no-any-return]


@receiver([post_save, post_delete], sender=AppSettings)
def _forget_app_settings(**_: Any) -> None:
    cache.delete(AppSettings.CACHE_KEY)


@receiver([post_save, post_delete], sender=AgentDefinition)
@receiver(m2m_changed, sender=AgentDefinition.groups.through)
def _forget_agents(**_: Any) -> None:
    # The cached rows carry their groups: a change of those (saved after the row by admin's
    # form) must clear them too.
    cache.delete(AgentDefinition.CACHE_KEY)
