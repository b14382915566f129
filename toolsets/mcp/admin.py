from __future__ import annotations

import difflib
import json
import re
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html, format_html_join

from core import redact
from core.crypto import mask

from .catalog import approve
from .discovery import refresh
from .models import MCPServer, OAuthGrant

_HEADER_NAME = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,100}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,100}$")


def _masked_lines(values: dict[str, str], separator: str) -> str:
    return "\n".join(f"{name}{separator}{mask(value) or '••••'}" for name, value in values.items())


def _parse_lines(
    text: str, separator: str, name_pattern: re.Pattern[str], stored: dict[str, str], what: str
) -> dict[str, str]:
    """`Name: value` lines; a value left as its mask keeps the stored one."""
    parsed: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        name, found, value = line.partition(separator)
        name, value = name.strip(), value.strip()
        if not found or not name_pattern.match(name):
            raise forms.ValidationError(f"Line {number}: expected {what}.")
        if name in stored and value in (mask(stored[name]), "••••"):
            value = stored[name]
        if not value or not value.isprintable():
            raise forms.ValidationError(f"Line {number}: the value is empty or has control characters.")
        parsed[name] = value
    return parsed


class MCPServerForm(forms.ModelForm):
    headers_text = forms.CharField(
        label="Request headers",
        required=False,
        widget=forms.Textarea(attrs={"rows": 3, "autocomplete": "off", "spellcheck": "false"}),
        help_text="One per line, <code>Name: value</code>. Stored encrypted and shown masked: leave a masked "
        "value as it is to keep it, delete its line to remove it.",
    )
    env_text = forms.CharField(
        label="Environment",
        required=False,
        widget=forms.Textarea(attrs={"rows": 3, "autocomplete": "off", "spellcheck": "false"}),
        help_text="For stdio: one per line, <code>NAME=value</code> (encrypted, masked like headers). The "
        "server gets these and a minimal environment (PATH, HOME…), never the worker's own.",
    )
    oauth_client_secret_text = forms.CharField(
        label="OAuth client secret",
        required=False,
        strip=True,
        widget=forms.PasswordInput(attrs={"autocomplete": "new-password"}, render_value=False),
        help_text="With a pre-registered client ID, if the client has a secret. Stored encrypted and never "
        "shown: leave empty to keep the stored one; tick below to remove it.",
    )
    clear_oauth_client_secret = forms.BooleanField(label="Remove the stored client secret", required=False)
    allowed_tools_text = forms.CharField(
        label="Allowed tools",
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="The server's tool names, one per line or comma-separated. Empty: every tool it lists.",
    )

    class Meta:
        model = MCPServer
        fields = [
            "name",
            "slug",
            "description",
            "enabled",
            "groups",
            "transport",
            "url",
            "command",
            "args",
            "credential",
            "credential_header",
            "credential_format",
            "oauth_scopes",
            "oauth_client_id",
            "oauth_issuer",
            "oauth_token_endpoint",
            "timeout_s",
            "trust_annotations",
            "use_instructions",
            "apps_enabled",
            "apps_confirm_messages",
        ]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            self.fields["headers_text"].initial = _masked_lines(self.instance.header_map(), ": ")
            self.fields["env_text"].initial = _masked_lines(self.instance.env_map(), "=")
            self.fields["allowed_tools_text"].initial = "\n".join(self.instance.allowed_tools or [])

    def clean_headers_text(self) -> dict[str, str]:
        stored = self.instance.header_map() if self.instance.pk else {}
        return _parse_lines(self.cleaned_data["headers_text"], ":", _HEADER_NAME, stored, "Name: value")

    def clean_env_text(self) -> dict[str, str]:
        stored = self.instance.env_map() if self.instance.pk else {}
        return _parse_lines(self.cleaned_data["env_text"], "=", _ENV_NAME, stored, "NAME=value")

    def clean_oauth_client_secret_text(self) -> str:
        secret: str = self.cleaned_data["oauth_client_secret_text"]
        if not secret.isprintable() or len(secret) > 2000:
            raise forms.ValidationError("Not a client secret (control characters, or too long).")
        return secret

    def clean_allowed_tools_text(self) -> list[str]:
        names = re.split(r"[\n,]", self.cleaned_data["allowed_tools_text"])
        return [name.strip() for name in names if name.strip()][:500]

    def save(self, commit: bool = True) -> MCPServer:
        import json

        server: MCPServer = super().save(commit=False)
        server.headers = json.dumps(self.cleaned_data["headers_text"]) if self.cleaned_data["headers_text"] else ""
        server.env = json.dumps(self.cleaned_data["env_text"]) if self.cleaned_data["env_text"] else ""
        server.allowed_tools = self.cleaned_data["allowed_tools_text"]
        secret = self.cleaned_data["oauth_client_secret_text"]
        if secret:
            server.oauth_client_secret = secret
            redact.register(secret)
        elif self.cleaned_data["clear_oauth_client_secret"]:
            server.oauth_client_secret = ""
        redact.register(*self.cleaned_data["headers_text"].values(), *self.cleaned_data["env_text"].values())
        if commit:
            server.save()
        return server


@admin.register(MCPServer)
class MCPServerAdmin(admin.ModelAdmin):
    form = MCPServerForm
    list_display = [
        "name",
        "slug",
        "transport",
        "enabled",
        "credential",
        "tool_count",
        "held_count",
        "protocol_version",
        "health",
        "tools_refreshed_at",
    ]
    list_filter = ["enabled", "transport", "credential", "groups"]
    filter_horizontal = ["groups"]
    search_fields = ["name", "slug", "url", "command"]
    actions = ["test_and_refresh", "accept_held_tools"]
    readonly_fields = ["server_identity", "instructions", "held_review", "tool_list", "health", "tools_refreshed_at"]
    fieldsets = [
        (None, {"fields": ["name", "slug", "description", "enabled", "groups"]}),
        ("Connection", {"fields": ["transport", "url", "command", "args", "env_text", "headers_text", "timeout_s"]}),
        (
            "Credentials",
            {
                "fields": [
                    "credential",
                    "credential_header",
                    "credential_format",
                    "oauth_scopes",
                    "oauth_client_id",
                    "oauth_client_secret_text",
                    "clear_oauth_client_secret",
                    "oauth_issuer",
                    "oauth_token_endpoint",
                ]
            },
        ),
        (
            "Tools",
            {
                "fields": [
                    "allowed_tools_text",
                    "trust_annotations",
                    "use_instructions",
                    "apps_enabled",
                    "apps_confirm_messages",
                    "server_identity",
                    "instructions",
                    "held_review",
                    "tool_list",
                    "tools_refreshed_at",
                    "health",
                ]
            },
        ),
    ]

    def has_add_permission(self, request: HttpRequest) -> bool:
        # A stdio server runs a command on the workers' hosts, and a URL may be on the private
        # network: only superusers register servers.
        return bool(getattr(request.user, "is_superuser", False))

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return bool(getattr(request.user, "is_superuser", False))

    @admin.display(description="tools")
    def tool_count(self, obj: MCPServer) -> int:
        return len(obj.tools or [])

    @admin.display(description="held")
    def held_count(self, obj: MCPServer) -> int:
        return len(obj.held_tools())

    @admin.display(description="server")
    def server_identity(self, obj: MCPServer) -> str:
        identity = f"{obj.server_name} {obj.server_version}".strip() or "—"
        return f"{identity} (protocol {obj.protocol_version})" if obj.protocol_version else identity

    @admin.display(description="held tools (not run until you accept them)")
    def held_review(self, obj: MCPServer) -> str:
        """What changed, as a diff of the approved definition against the server's current one
        (escaped: it is the server's text)."""
        held = obj.held_tools()
        if not held:
            return "— (every listed tool is as approved)"
        listed = {t["name"]: t for t in obj.tools if isinstance(t, dict)}
        approved = obj.approved_tools if isinstance(obj.approved_tools, dict) else {}
        items = []
        for name, why in sorted(held.items()):
            before = json.dumps(approved.get(name, {}), indent=2, sort_keys=True).splitlines()
            after = json.dumps(listed[name], indent=2, sort_keys=True).splitlines()
            diff = "\n".join(difflib.unified_diff(before, after, "approved", "listed now", lineterm="", n=2))
            items.append((name, why, diff))
        rows = format_html_join(
            "",
            '<li data-held-tool="{}"><code>{}</code> — {}<pre class="mcp-diff">{}</pre></li>',
            ((name, name, why, diff) for name, why, diff in items),
        )
        return format_html(
            "<ul>{}</ul><p>Select the server in the list and run “Accept held tool definitions” to let them "
            "run as listed now.</p>",
            rows,
        )

    @admin.display(description="tools the server lists")
    def tool_list(self, obj: MCPServer) -> str:
        if not obj.tools:
            return "— (save, or use the action “Test connection / refresh tools”)"
        rows = format_html_join(
            "", "<li><code>{}</code> — {}</li>", ((t.get("name", ""), t.get("description", "")) for t in obj.tools)
        )
        return format_html("<ul>{}</ul>", rows)

    @admin.display(description="health")
    def health(self, obj: MCPServer) -> str:
        if obj.last_error_at and (obj.last_ok_at is None or obj.last_error_at > obj.last_ok_at):
            return format_html(
                "Unreachable since {}: {}", obj.last_error_at.strftime("%Y-%m-%d %H:%M:%S"), obj.last_error
            )
        return "OK" if obj.last_ok_at else "—"

    def save_model(self, request: HttpRequest, obj: MCPServer, form: Any, change: bool) -> None:
        super().save_model(request, obj, form, change)
        if obj.enabled:
            ok, text = refresh(obj, request.user.pk)
            self.message_user(request, text, messages.SUCCESS if ok else messages.WARNING)

    @admin.action(description="Accept held tool definitions")
    def accept_held_tools(self, request: HttpRequest, queryset: QuerySet[MCPServer]) -> None:
        for server in queryset:
            accepted = approve(server)
            if accepted:
                self.message_user(request, f"{server.name}: accepted {', '.join(accepted)}.", messages.SUCCESS)
            else:
                self.message_user(request, f"{server.name}: no held tools.", messages.INFO)

    @admin.action(description="Test connection / refresh tools")
    def test_and_refresh(self, request: HttpRequest, queryset: QuerySet[MCPServer]) -> None:
        for server in queryset:
            ok, text = refresh(server, request.user.pk)
            self.message_user(request, text, messages.SUCCESS if ok else messages.ERROR)


@admin.register(OAuthGrant)
class OAuthGrantAdmin(admin.ModelAdmin):
    list_display = ["user", "server", "connected", "updated_at"]
    list_filter = ["server"]
    search_fields = ["user__username"]
    exclude = ["tokens", "client_info"]
    readonly_fields = ["user", "server", "expires_at"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # made by the user's own consent

    @admin.display(boolean=True)
    def connected(self, obj: OAuthGrant) -> bool:
        return obj.connected
