"""Admin/user forms for secrets: never rendered back, shown masked, blank keeps the old value."""

from __future__ import annotations

from typing import Any

from django import forms

from .crypto import mask


class SecretInput(forms.PasswordInput):
    def __init__(self, attrs: dict[str, Any] | None = None) -> None:
        super().__init__(attrs={"autocomplete": "new-password", **(attrs or {})}, render_value=False)


class SecretFieldsMixin(forms.ModelForm):
    """List secret model fields in `secret_fields`. The current value is shown only as a mask
    in the placeholder; submitting the field blank keeps it; ticking "clear" removes it."""

    secret_fields: tuple[str, ...] = ()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for name in self.secret_fields:
            field = self.fields[name]
            field.widget = SecretInput()
            field.required = False
            current = getattr(self.instance, name, "") if self.instance and self.instance.pk else ""
            field.widget.attrs["placeholder"] = mask(current) if current else "Not set"
            if current:
                field.help_text = f"Stored encrypted ({mask(current)}). Leave blank to keep it."
                self.fields[f"clear_{name}"] = forms.BooleanField(required=False, label=f"Clear {field.label}")

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        for name in self.secret_fields:
            if data.get(f"clear_{name}"):
                data[name] = ""
            elif not data.get(name) and self.instance and self.instance.pk:
                data[name] = getattr(self.instance, name)
        return data
