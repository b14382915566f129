"""`manage.py check_secrets`: can this instance decrypt every stored secret?

Run it after restoring a backup, moving to a new host or changing keys, before users notice a
provider key that no longer works. Exit status: 0 every secret decrypts; 1 at least one does
not; 2 the check could not run (database unreachable, migrations not applied).
"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand
from django.db import DatabaseError

from core import secrets_check

EXIT_FAILED = 1
EXIT_CANNOT_CHECK = 2


class Command(BaseCommand):
    help = (
        "Decrypt every stored secret (each encrypted field of every model) with this instance's key and report "
        "which cannot be read. Never prints a secret. Exit 0: all readable; 1: some are not; 2: could not check."
    )
    # A restored database may be a version behind the code: report, do not stop at the
    # migrations check.
    requires_migrations_checks = False

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--database", default="default", help="The database alias to check.")
        parser.add_argument("--json", action="store_true", help="Print the report as one JSON object.")
        parser.add_argument(
            "--clear-unreadable",
            action="store_true",
            help="Blank every secret that cannot be read (the key it was saved with is lost), so it can be entered "
            "again. Asks first unless --no-input is given.",
        )
        parser.add_argument("--no-input", action="store_false", dest="interactive", help="Do not ask.")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            report = secrets_check.check(options["database"])
        except DatabaseError as exc:
            # The exception's type and message name a table or a connection problem, never data.
            self.stderr.write(f"Cannot check the stored secrets: {type(exc).__name__}: {exc}")
            self.stderr.write("Is DATABASE_URL right, and has `manage.py migrate` been run?")
            raise SystemExit(EXIT_CANNOT_CHECK) from None
        if options["json"]:
            self.stdout.write(json.dumps(_as_dict(report), indent=2))
        else:
            self._print(report)
        if not report.ok and options["clear_unreadable"]:
            self._clear(report, options["database"], interactive=options["interactive"])
            return
        if not report.ok:
            raise SystemExit(EXIT_FAILED)

    def _clear(self, report: secrets_check.Report, using: str, *, interactive: bool) -> None:
        if interactive:
            answer = input(f"Blank the {report.failed} unreadable secrets listed above? Type 'yes' to go on: ")
            if answer.strip().lower() != "yes":
                self.stderr.write("Nothing changed.")
                raise SystemExit(EXIT_FAILED)
        cleared = secrets_check.clear_unreadable(report, using)
        self.stdout.write(
            self.style.WARNING(f"Blanked {cleared} unreadable secrets: enter them again in admin or on /toolsets/.")
        )

    def _print(self, report: secrets_check.Report) -> None:
        self.stdout.write(f"Key: {report.key_source}")
        width = max((len(f.label) for f in report.fields), default=0)
        for f in report.fields:
            status = self.style.SUCCESS("ok") if f.ok else self.style.ERROR("FAILED")
            self.stdout.write(f"  {f.label:<{width}}  {f.checked:>6} stored  {status}")
            for problem, pks in f.failures.items():
                shown = ", ".join(pks[:20]) + (f" and {len(pks) - 20} more" if len(pks) > 20 else "")
                self.stdout.write(f"      {len(pks)} {problem} (primary keys: {shown})")
        if report.ok:
            self.stdout.write(self.style.SUCCESS(f"All {report.checked} stored secrets decrypt with this key."))
            return
        self.stdout.write(
            self.style.ERROR(f"{report.failed} of {report.checked} stored secrets cannot be read with this key.")
        )
        self.stdout.write(
            "Start this instance with the FIELD_ENCRYPTION_KEY (or, if that was never set, the SECRET_KEY) the "
            "data was saved with. If that key is lost, `--clear-unreadable` blanks these secrets so they can be "
            "entered again (in admin, or by their users on /toolsets/)."
        )


def _as_dict(report: secrets_check.Report) -> dict[str, Any]:
    return {
        "ok": report.ok,
        "key_source": report.key_source,
        "checked": report.checked,
        "failed": report.failed,
        "fields": [{"field": f.label, "checked": f.checked, "ok": f.ok, "failures": f.failures} for f in report.fields],
    }
