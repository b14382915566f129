from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from .models import Attachment, FileLimits


@admin.register(FileLimits)
class FileLimitsAdmin(admin.ModelAdmin):
    list_display = ["__str__", "max_file_mb", "max_files_per_message", "max_total_mb_per_user"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return not FileLimits.objects.exists()

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Attachment)
class AttachmentAdmin(admin.ModelAdmin):
    list_display = ["name", "owner", "kind", "size", "status", "created_at"]
    list_filter = ["status", "kind"]
    search_fields = ["name", "owner__username"]
    readonly_fields = ["owner", "chat", "message", "file", "name", "size", "kind", "content_type", "status", "error"]
    exclude = ["text", "page_starts", "facts"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False
