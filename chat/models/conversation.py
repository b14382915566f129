from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models, transaction
from django.utils import timezone

from .catalog import LLMModel


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
    # A run of an automation (automations/, which says which run): started by nobody typing.
    # Reading it costs nothing where the chat is loaded: only a run's turns tell their start and
    # end to the floors above (chat/signals.py), so other turns pay no query for receivers they
    # do not concern, and the list shows a run's badge with one query at most.
    automated = models.BooleanField(default=False)
    # The agent the chat is held as (its id, chat/agents): every turn answers with its
    # instructions, toolsets' scope, iteration limit and model, as the hub's `agent/<id>` turns
    # do. Set by an automation held as an agent; "" for the assistant itself.
    agent = models.CharField(max_length=60, blank=True, default="")
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
        turn = cls.objects.select_related("chat", "chat__owner", "model").get(pk=pk)
        if turn.chat.automated:
            from chat.signals import turn_started

            transaction.on_commit(lambda: turn_started.send_robust(cls, turn_id=pk, automated=True))
        return turn

    @classmethod
    def cancel_if_queued(cls, pk: int) -> bool:
        """queued → cancelled (Stop before any worker took it)."""
        if not cls.objects.filter(pk=pk, status=cls.Status.QUEUED).update(status=cls.Status.CANCELLED):
            return False
        chat_id, automated = cls.objects.filter(pk=pk).values_list("chat_id", "chat__automated").first() or (0, False)
        _closed(pk, chat_id, cls.Status.CANCELLED, "", automated)
        return True

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
        # The worker's turn came with its chat (the claim's query): no query to know if it is a
        # run; else (the reaper's rare close) `_closed` looks.
        automated = self.chat.automated if Turn.chat.is_cached(self) else None
        _closed(self.pk, self.chat_id, status, str(fields.get("error", "")), automated)
        return True


def _closed(turn_id: int, chat_id: int, status: str, error: str, automated: bool | None = None) -> None:
    """Tells the floors above (chat/signals.py) once the end is committed, for a run's turn only
    (`automated`: None when the caller does not know): a receiver reading the turn sees it ended."""
    from chat.signals import turn_closed

    def send() -> None:
        if not (automated or (automated is None and Chat.objects.filter(pk=chat_id, automated=True).exists())):
            return
        turn_closed.send_robust(Turn, turn_id=turn_id, chat_id=chat_id, status=str(status), error=error, automated=True)

    transaction.on_commit(send)


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
    over the same part finds it again (agent.context); the chat itself is never changed."""

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


class UserChatDefaults(models.Model):
    """What a user's next new chat starts with: their last tool selection."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="chat_defaults")
    enabled_tools = models.JSONField(default=dict, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"Chat defaults of {self.user}"
