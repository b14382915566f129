"""Can this instance read every secret it stores? The check run after a restore or a key change.

Every `EncryptedTextField` of every installed model is read as stored (ciphertext, bypassing the
field's own decryption) and decrypted with the key the running process has, exactly as the app
would. The report counts and locates failures by model, field and primary key, and never holds
a plaintext or a ciphertext, so it can be printed, logged or attached to a ticket.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from django.apps import apps
from django.conf import settings
from django.db import models
from django.db.models.functions import Cast

from . import crypto

# Problems, in the words the report uses.
UNDECRYPTABLE = "cannot be decrypted with this key"
NOT_ENCRYPTED = "is stored unencrypted"


@dataclass
class FieldReport:
    label: str  # "chat.LLMModel.api_key"
    checked: int = 0  # non-empty values read
    failures: dict[str, list[str]] = field(default_factory=dict)  # problem → primary keys

    @property
    def ok(self) -> bool:
        return not self.failures

    @property
    def failed(self) -> int:
        return sum(len(pks) for pks in self.failures.values())


@dataclass
class Report:
    key_source: str
    fields: list[FieldReport]

    @property
    def ok(self) -> bool:
        return all(f.ok for f in self.fields)

    @property
    def checked(self) -> int:
        return sum(f.checked for f in self.fields)

    @property
    def failed(self) -> int:
        return sum(f.failed for f in self.fields)


def key_source() -> str:
    """Where the encryption key comes from (its name, never its value)."""
    if os.environ.get("FIELD_ENCRYPTION_KEY"):
        return "FIELD_ENCRYPTION_KEY"
    if os.environ.get("SECRET_KEY"):
        return "SECRET_KEY (FIELD_ENCRYPTION_KEY is not set)"
    return (
        f"the generated key in {settings.VAR_DIR / 'secret_key'} (neither FIELD_ENCRYPTION_KEY nor SECRET_KEY is set)"
    )


def encrypted_fields() -> list[tuple[type[models.Model], crypto.EncryptedTextField]]:
    """Every encrypted column of the installed models, in a stable order."""
    found = [
        (model, f)
        for model in apps.get_models()
        for f in model._meta.concrete_fields
        if isinstance(f, crypto.EncryptedTextField)
    ]
    return sorted(found, key=lambda pair: (pair[0]._meta.label, pair[1].name))


def _problem(stored: str) -> str | None:
    if not stored.startswith(crypto.PREFIX):
        return NOT_ENCRYPTED
    try:
        # The app's own decryption: what passes here is what the app will be able to read.
        crypto.decrypt(stored)
    except ValueError:
        return UNDECRYPTABLE
    return None


def check(using: str = "default") -> Report:
    """Reads every stored secret once. Database errors (no such table: migrations not applied)
    propagate: an instance that cannot be read cannot be declared fine."""
    reports = []
    for model, f in encrypted_fields():
        report = FieldReport(f"{model._meta.label}.{f.name}")
        rows = (
            model._base_manager.using(using)
            .exclude(**{f.attname: ""})
            .exclude(**{f"{f.attname}__isnull": True})
            # Cast to a plain text column: the value as stored, not through the field's decryption.
            .annotate(_stored=Cast(f.attname, output_field=models.TextField()))
            .order_by("pk")
            .values_list("pk", "_stored")
        )
        for pk, stored in rows.iterator(chunk_size=500):
            report.checked += 1
            problem = _problem(stored)
            if problem:
                report.failures.setdefault(problem, []).append(str(pk))
        reports.append(report)
    return Report(key_source(), reports)


def clear_unreadable(report: Report, using: str = "default") -> int:
    """Blanks the values `report` found unreadable (their key is lost): the app reads a blank
    secret as "not configured", where an unreadable one fails every page that loads its row."""
    by_label = {f"{model._meta.label}.{f.name}": (model, f) for model, f in encrypted_fields()}
    cleared = 0
    for field_report in report.fields:
        model, f = by_label[field_report.label]
        for pks in field_report.failures.values():
            cleared += model._base_manager.using(using).filter(pk__in=pks).update(**{f.attname: ""})
    return cleared
