"""`make run`'s set-up of a machine for one person: the example MCP server, the Code toolset
switched on where sandboxes can run, and the demo user (created once, with a generated password
printed only at creation)."""

from __future__ import annotations

import secrets
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Create the demo user (once) and print its generated password."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--username", default="demo")

    def handle(self, *args: Any, **options: Any) -> None:
        self._example_mcp_server()
        self._code_toolset()
        User = get_user_model()
        username = options["username"]
        if User.objects.filter(username=username).exists():
            self.stdout.write(
                f"Demo user '{username}' exists. Its password was printed when it was created; "
                f"reset it with: .venv/bin/python manage.py changepassword {username}"
            )
            return
        password = secrets.token_urlsafe(12)
        User.objects.create_superuser(username=username, email="", password=password)
        bar = "=" * 64
        lines = [bar, "  Demo user created", f"  username: {username}", f"  password: {password}", "  shown once", bar]
        self.stdout.write(self.style.SUCCESS("\n" + "\n".join(lines) + "\n"))

    def _example_mcp_server(self) -> None:
        """Registers and enables the example MCP server (a unit converter over stdio) once."""
        from toolsets.mcp.setup import register_example

        self.stdout.write(register_example())

    def _code_toolset(self) -> None:
        """Code is off until an admin switches it on (people's code on the server's machine).
        Under `make run` the person at the keyboard is that admin and the machine is theirs, so
        it is switched on once, when the sandbox can run here; a choice saved since is kept."""
        from sandbox import jail
        from toolsets.models import ToolsetConfig

        lacking = jail.missing()
        if lacking:
            self.stdout.write(f"Code toolset left off: {lacking}")
            return
        _, created = ToolsetConfig.objects.get_or_create(toolset_id="code", defaults={"enabled": True})
        if created:
            self.stdout.write(
                "Switched on the Code toolset (Python in a bubblewrap sandbox per chat); "
                "switch it off in the admin, Toolset configurations."
            )
