"""MCP servers an admin registered, and what each user holds for them (OAuth grants).

A server's tools are cached here (`tools`, as `tools/list` returned them, bounded) so that
every process builds the same toolset without connecting; its health (`last_error_at`,
`last_ok_at`) is written by whichever process last talked to it.
"""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models

from core.crypto import EncryptedTextField, header_values, json_keys, json_values

SLUG_PATTERN = r"^[a-z0-9]+(?:[-_][a-z0-9]+)*$"
SLUG_MAX = 20


class MCPServer(models.Model):
    class Transport(models.TextChoices):
        HTTP = "http", "Streamable HTTP (URL)"
        SSE = "sse", "SSE, legacy (URL)"
        STDIO = "stdio", "stdio (a command on this host)"

    class Credential(models.TextChoices):
        NONE = "none", "None: every user shares the server's headers"
        USER_TOKEN = "user_token", "Each user enters their own token on /toolsets/"
        OAUTH = "oauth", "Each user connects with OAuth (MCP authorization)"

    name = models.CharField(max_length=80)
    slug = models.CharField(
        max_length=SLUG_MAX,
        unique=True,
        validators=[RegexValidator(SLUG_PATTERN, "Lower-case letters and digits, with single - or _ between.")],
        help_text="Short id: the toolset is mcp_<slug>, and the model sees toolset__mcp_<slug>__<tool>.",
    )
    description = models.TextField(blank=True, help_text="Shown to users on /toolsets/.")
    transport = models.CharField(max_length=10, choices=Transport.choices, default=Transport.HTTP)
    url = models.URLField("URL", max_length=2000, blank=True, help_text="For HTTP and SSE: the endpoint.")
    command = models.CharField(
        max_length=500, blank=True, help_text="For stdio: the program, started once per worker process."
    )
    args = models.JSONField("arguments", default=list, blank=True, help_text='For stdio, e.g. ["-m", "my_server"].')
    # JSON objects, encrypted as a whole: header values and environment variables are credentials.
    env = EncryptedTextField("environment", blank=True, default="", secret_parts=json_values)
    headers = EncryptedTextField("request headers", blank=True, default="", secret_parts=header_values)
    credential = models.CharField(max_length=20, choices=Credential.choices, default=Credential.NONE)
    credential_header = models.CharField(
        max_length=100, default="Authorization", help_text="The header a user's token goes in."
    )
    credential_format = models.CharField(
        max_length=200, default="Bearer {token}", help_text="The header's value; {token} is the user's token."
    )
    oauth_scopes = models.CharField("OAuth scopes", max_length=500, blank=True)
    # A client the server's authorization server issued to Tessera out of band (servers without
    # dynamic registration or Client ID Metadata Documents).
    oauth_client_id = models.CharField(
        "OAuth client ID",
        max_length=500,
        blank=True,
        help_text="A pre-registered client. Empty: Tessera's Client ID Metadata Document (https sites) "
        "or dynamic registration, whichever the server supports.",
    )
    oauth_client_secret = EncryptedTextField("OAuth client secret", blank=True, default="")
    # Where the secret may go: the authorization server it was registered with. A server's
    # metadata naming another issuer or token endpoint later is refused, never sent the secret.
    oauth_issuer = models.URLField(
        "OAuth issuer",
        max_length=500,
        blank=True,
        help_text="The authorization server the client was registered with (its issuer). Empty: the one "
        "seen when the secret is first used, kept from then on.",
    )
    oauth_token_endpoint = models.URLField(
        "OAuth token endpoint",
        max_length=500,
        blank=True,
        help_text="Where the client secret is sent. Empty: the one seen when the secret is first used, "
        "kept from then on.",
    )
    timeout_s = models.PositiveIntegerField(
        "timeout (s)",
        default=30,
        validators=[MinValueValidator(1), MaxValueValidator(600)],
        help_text="How long one tool call may take.",
    )
    enabled = models.BooleanField(default=True)
    groups = models.ManyToManyField(
        "auth.Group",
        blank=True,
        related_name="mcp_servers",
        help_text="Only members of these groups may use its tools; none chosen: everyone.",
    )
    allowed_tools = models.JSONField(
        default=list, blank=True, help_text="Only these tools (the server's own names); empty: all of them."
    )
    trust_annotations = models.BooleanField(
        "trust this server's annotations",
        default=False,
        help_text="Annotations are the server's own claims. Off: every tool asks before it runs unless you set "
        "a policy. On: tools it marks read-only run without asking.",
    )

    # What the server said about itself and its tools at the last refresh.
    server_name = models.CharField(max_length=200, blank=True)
    server_version = models.CharField(max_length=100, blank=True)
    # The revision it was spoken to in: 2026-07-28 (stateless) or a handshake-era one.
    protocol_version = models.CharField(max_length=20, blank=True)
    tools = models.JSONField(default=list, blank=True)
    # The definitions an admin accepted, by tool name (pinned): a listed tool whose definition
    # differs from its pinned one is held until an admin reviews it (`catalog.held_tools`).
    approved_tools = models.JSONField(default=dict, blank=True)
    tools_refreshed_at = models.DateTimeField(null=True, blank=True)
    # What the server asks a client's model to know (its `instructions`), cleaned and capped.
    instructions = models.TextField(blank=True)
    use_instructions = models.BooleanField(
        "give the model the server's instructions",
        default=True,
        help_text="The server's own text (capped, marked as the server's) in the system prompt of chats that "
        "selected its tools.",
    )

    apps_enabled = models.BooleanField(
        "show the server's apps",
        default=True,
        help_text="MCP Apps: a tool that names a ui:// page shows it in its card, sandboxed on an origin of its "
        "own. Off: its cards show the plain result, and app-only tools are never called. Test the connection "
        "after turning it on, so the pages are fetched.",
    )
    apps_confirm_messages = models.BooleanField(
        "confirm the apps' messages",
        default=False,
        help_text="MCP Apps: a server's View may send a message into the chat as the user (always shown as "
        "theirs). On: the user first sees the message on the app's card and sends or discards it. Off: it is "
        "sent at once.",
    )

    last_error = models.TextField(blank=True)
    last_error_at = models.DateTimeField(null=True, blank=True)
    last_ok_at = models.DateTimeField(null=True, blank=True)

    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        verbose_name = "MCP server"

    def __str__(self) -> str:
        return self.name

    @property
    def toolset_id(self) -> str:
        return f"mcp_{self.slug}"

    def held_tools(self) -> dict[str, str]:
        """The listed tools that may not run until an admin reviews them, with why."""
        held: dict[str, str] = {}
        approved = self.approved_tools if isinstance(self.approved_tools, dict) else {}
        for tool in self.tools or []:
            if not isinstance(tool, dict):
                continue
            pinned = approved.get(tool.get("name"))
            if pinned is None:
                held[tool["name"]] = "new"
            elif pinned != tool:
                held[tool["name"]] = "changed"
        return held

    def header_map(self) -> dict[str, str]:
        return _json_object(self.headers)

    def env_map(self) -> dict[str, str]:
        return _json_object(self.env)

    def clean(self) -> None:
        if self.transport == self.Transport.STDIO:
            if not self.command.strip():
                raise ValidationError({"command": "A stdio server needs a command."})
            if self.credential != self.Credential.NONE:
                raise ValidationError({"credential": "A stdio server is shared: it cannot take per-user credentials."})
        elif not self.url:
            raise ValidationError({"url": "An HTTP or SSE server needs a URL."})
        if not isinstance(self.args, list) or not all(isinstance(a, str) for a in self.args):
            raise ValidationError({"args": "A JSON list of strings."})
        if not isinstance(self.allowed_tools, list) or not all(isinstance(a, str) for a in self.allowed_tools):
            raise ValidationError({"allowed_tools": "A JSON list of tool names."})
        if self.credential == self.Credential.USER_TOKEN and "{token}" not in self.credential_format:
            raise ValidationError({"credential_format": "Must contain {token}."})


class AppResource(models.Model):
    """A server's `ui://` page (an MCP App's View) as fetched, by its hash: a tool's stored
    definition names the hash, so a changed page is a changed definition (held for an admin
    like any other change), and the card of an old call shows the page it was shown with."""

    server = models.ForeignKey(MCPServer, on_delete=models.CASCADE, related_name="app_resources")
    sha256 = models.CharField(max_length=64)
    uri = models.CharField(max_length=500)
    html = models.TextField()
    # The resource's `_meta.ui`, cleaned: csp (declared domains), permissions, prefersBorder.
    meta = models.JSONField(default=dict, blank=True)
    fetched_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["server", "sha256"], name="mcp_one_app_resource_per_hash")]

    def __str__(self) -> str:
        return f"{self.server} · {self.uri}"


class OAuthGrant(models.Model):
    """One user's OAuth state for one server: the client registered for them and their tokens."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="mcp_grants")
    server = models.ForeignKey(MCPServer, on_delete=models.CASCADE, related_name="grants")
    client_info = EncryptedTextField(blank=True, default="", secret_parts=json_keys("client_secret"))
    tokens = EncryptedTextField(
        blank=True, default="", secret_parts=json_keys("access_token", "refresh_token", "id_token")
    )
    # When the access token stops working (epoch seconds), so a worker refreshes it in time.
    expires_at = models.FloatField(null=True, blank=True)
    # The scope a call needed beyond the grant (a step-up): the user's next Connect asks for it.
    wanted_scope = models.CharField(max_length=1000, blank=True, default="")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "server"], name="mcp_one_grant_per_user_server")]
        verbose_name = "OAuth connection"

    def __str__(self) -> str:
        return f"{self.user} · {self.server}"

    @property
    def connected(self) -> bool:
        return bool(self.tokens)


def _json_object(text: str) -> dict[str, str]:
    if not text:
        return {}
    try:
        value: Any = json.loads(text)
    except ValueError:
        return {}
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}
