from __future__ import annotations

import hashlib
import secrets
from typing import Any

from django.conf import settings
from django.db import models
from django.db.models.signals import post_save
from django.dispatch import receiver
from django.utils import timezone


class ApiToken(models.Model):
    """A personal token for programs (the execution API, `/mcp`, `/v1`). Only a hash is stored;
    the token is shown once."""

    PREFIX = "tsk_"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100)
    token_hash = models.CharField(max_length=64, unique=True)
    hint = models.CharField(max_length=12, help_text="The token's last characters, to recognise it.")
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    # Chosen when the token is created, never later: calls with this token may run "ask" tools
    # when the request also says `"approve": true`.
    can_approve = models.BooleanField(
        "may approve ask tools", default=False, help_text="Calls may run tools whose policy is Ask."
    )
    # What a token reaches, chosen at creation: Tessera's tools (the execution API, MCP, the
    # server-side tools of the OpenAI-compatible API) and its agents (agents as MCP tools and as
    # models of the OpenAI-compatible API).
    may_use_tools = models.BooleanField("tools", default=True, help_text="Calls may run Tessera's tools.")
    may_use_agents = models.BooleanField("agents", default=True, help_text="Calls may run Tessera's agents.")

    class Meta:
        # The model began in `toolsets` and moved here by state only (hub/migrations/0001):
        # its rows stay in the table they were written to.
        db_table = "toolsets_apitoken"
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name} (…{self.hint})"

    @staticmethod
    def hash(token: str) -> str:
        return hashlib.sha256(token.encode()).hexdigest()

    @classmethod
    def issue(
        cls, user: Any, name: str, *, can_approve: bool = False, tools: bool = True, agents: bool = True
    ) -> tuple[ApiToken, str]:
        token = cls.PREFIX + secrets.token_urlsafe(32)
        record = cls.objects.create(
            user=user,
            name=name,
            token_hash=cls.hash(token),
            hint=token[-4:],
            can_approve=can_approve,
            may_use_tools=tools,
            may_use_agents=agents,
        )
        return record, token

    @classmethod
    def revoke_all(cls, user_id: int) -> int:
        return cls.objects.filter(user_id=user_id, revoked_at=None).update(revoked_at=timezone.now())

    @classmethod
    def authenticate(cls, token: str) -> ApiToken | None:
        if not token.startswith(cls.PREFIX):
            return None
        record = cls.objects.select_related("user").filter(token_hash=cls.hash(token), revoked_at=None).first()
        if record is None or not record.user.is_active:
            return None
        return record


@receiver(post_save, sender=settings.AUTH_USER_MODEL)
def _revoke_tokens_on_password_change(instance: Any, created: bool, **_: Any) -> None:
    """A new password revokes the user's API tokens, however it was set (the account page, the
    admin, `changepassword`, a reset): whoever changes a password because it leaked expects
    nothing that password could have made to keep working. `set_password` leaves the new
    password in `_password` until the save is done."""
    if not created and getattr(instance, "_password", None) is not None:
        ApiToken.revoke_all(instance.pk)
