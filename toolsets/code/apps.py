from __future__ import annotations

from django.apps import AppConfig


class CodeConfig(AppConfig):
    name = "toolsets.code"
    label = "code"
    verbose_name = "Code"
