from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse

from .models import AccountSettings


@admin.register(AccountSettings)
class AccountSettingsAdmin(admin.ModelAdmin):
    fields = ["open_signup"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # the single row is created on first use

    def has_delete_permission(self, request: HttpRequest, obj: AccountSettings | None = None) -> bool:
        return False

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, object] | None = None) -> HttpResponse:
        # One row: the list would only ever hold it, so go straight to it.
        obj = AccountSettings.load()
        return HttpResponseRedirect(reverse("admin:accounts_accountsettings_change", args=[obj.pk]))
