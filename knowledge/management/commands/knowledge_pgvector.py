"""Searches knowledge vectors inside PostgreSQL once its server has pgvector (knowledge/pgvector.py):
run after installing the extension on a server Tessera already uses, then restart Tessera's
processes (each looks for the column once)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand
from django.db import transaction

from knowledge import pgvector


class Command(BaseCommand):
    help = "Use pgvector for knowledge search where the PostgreSQL server has it, filling in stored vectors."

    def handle(self, *args: Any, **options: Any) -> None:
        with transaction.atomic():
            self.stdout.write(pgvector.install())
