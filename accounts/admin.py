from __future__ import annotations

from urllib.parse import urlsplit

from allauth.account.models import EmailAddress
from allauth.socialaccount.models import SocialApp, SocialToken
from django import forms
from django.contrib import admin
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse

from core.secrets_form import SecretFieldsMixin

from .models import AccountSettings, OIDCProvider


@admin.register(AccountSettings)
class AccountSettingsAdmin(admin.ModelAdmin):
    fields = ["open_signup", "password_signin"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # the single row is created on first use

    def has_delete_permission(self, request: HttpRequest, obj: AccountSettings | None = None) -> bool:
        return False

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, object] | None = None) -> HttpResponse:
        # One row: the list would only ever hold it, so go straight to it.
        obj = AccountSettings.load()
        return HttpResponseRedirect(reverse("admin:accounts_accountsettings_change", args=[obj.pk]))


class OIDCProviderForm(SecretFieldsMixin):
    secret_fields = ("client_secret",)

    class Meta:
        model = OIDCProvider
        fields = [
            "label",
            "slug",
            "issuer",
            "client_id",
            "client_secret",
            "scopes",
            "groups_claim",
            "create_groups",
            "create_users",
            "enabled",
            "order",
        ]

    def clean_issuer(self) -> str:
        issuer: str = self.cleaned_data["issuer"].strip()
        parts = urlsplit(issuer)
        if parts.scheme not in ("https", "http") or parts.query or parts.fragment:
            raise forms.ValidationError(
                "Give the issuer as an http(s) address without a query, e.g. https://sso.example.com/realms/acme."
            )
        # Allauth appends /.well-known/openid-configuration itself unless it is there already.
        return issuer.rstrip("/")

    def clean_scopes(self) -> str:
        scopes = self.cleaned_data["scopes"].split()
        if any(not scope.isprintable() or '"' in scope for scope in scopes):
            raise forms.ValidationError("Scopes are words separated by spaces.")
        return " ".join(scopes)


@admin.register(OIDCProvider)
class OIDCProviderAdmin(admin.ModelAdmin):
    form = OIDCProviderForm
    list_display = ["label", "slug", "issuer", "enabled", "create_users", "groups_claim", "order"]
    list_editable = ["enabled", "order"]
    list_filter = ["enabled"]
    search_fields = ["label", "slug", "issuer", "client_id"]
    readonly_fields = ["redirect_uri"]

    @admin.display(description="redirect URI")
    def redirect_uri(self, obj: OIDCProvider) -> str:
        if not obj.slug:
            return "Shown once the provider is saved."
        path = reverse("openid_connect_callback", kwargs={"provider_id": obj.slug})
        return f"{path} on this site's address (https://your-host{path}): register it at the provider."


# Tessera keeps providers in OIDCProvider (secrets encrypted), stores no provider tokens and
# sends no mail: allauth's own tables for those would only mislead an admin. The links between
# accounts and providers (Social accounts) stay listed.
for _model in (SocialApp, SocialToken, EmailAddress):
    if admin.site.is_registered(_model):
        admin.site.unregister(_model)
