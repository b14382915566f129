"""Creates the sample workspace for one user or for all; users who have data are left alone."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from toolsets.workspace.sample_data import seed_for_user


class Command(BaseCommand):
    help = "Create sample workspace data (projects, tasks, calendar, email, meetings, posts) for users."

    def add_arguments(self, parser: Any) -> None:
        target = parser.add_mutually_exclusive_group(required=True)
        target.add_argument("--user", metavar="USERNAME", help="Seed this user's workspace.")
        target.add_argument("--all", action="store_true", help="Seed every user's workspace.")

    def handle(self, *args: Any, **options: Any) -> None:
        User = get_user_model()
        if options["all"]:
            users = list(User.objects.order_by("pk"))
        else:
            try:
                users = [User.objects.get_by_natural_key(options["user"])]
            except User.DoesNotExist:
                raise CommandError(f"No user named {options['user']!r}.") from None
        seeded = 0
        for user in users:
            if seed_for_user(user):
                seeded += 1
                self.stdout.write(self.style.SUCCESS(f"Seeded sample data for {user.get_username()}."))
            else:
                self.stdout.write(f"{user.get_username()} already has workspace data; left unchanged.")
        self.stdout.write(f"Done: {seeded} of {len(users)} user(s) seeded.")
