from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from .models import ApiToken


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ["name", "user", "hint", "can_approve", "created_at", "last_used_at", "revoked_at"]
    list_filter = ["revoked_at"]
    search_fields = ["name", "user__username"]
    list_select_related = ["user"]
    exclude = ["token_hash"]
    readonly_fields = ["user", "name", "hint", "can_approve", "created_at", "last_used_at"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # tokens are issued by their owner, on their account page
