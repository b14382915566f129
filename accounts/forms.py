from __future__ import annotations

from typing import Any

from django import forms
from django.contrib.auth import get_user_model
from django.contrib.auth.forms import UserCreationForm

NAME_MAX = 150


def clean_name(value: str) -> str:
    # One line, no control characters: the name goes into the model's instructions and the
    # Workspace sample data.
    kept = "".join(ch if ch.isprintable() else " " if ch.isspace() else "" for ch in value)
    name = " ".join(kept.split())
    if len(name) > NAME_MAX:
        raise forms.ValidationError(f"Keep your name under {NAME_MAX} characters.")
    return name


class SignupForm(UserCreationForm):  # type: ignore[type-arg]
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("label_suffix", "")  # labels sit above their fields, without a colon
        super().__init__(*args, **kwargs)

    name = forms.CharField(
        label="Your name",
        required=False,
        max_length=NAME_MAX * 2,
        help_text="How Tessera addresses you; your sample tasks are assigned to this name.",
    )

    class Meta(UserCreationForm.Meta):
        model = get_user_model()
        fields = ("username",)

    def clean_name(self) -> str:
        return clean_name(self.cleaned_data.get("name") or "")

    def save(self, commit: bool = True) -> Any:
        user = super().save(commit=False)
        user.first_name = self.cleaned_data.get("name", "")
        if commit:
            user.save()
        return user


class NameForm(forms.Form):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("label_suffix", "")  # labels sit above their fields, without a colon
        super().__init__(*args, **kwargs)

    name = forms.CharField(label="Your name", required=False, max_length=NAME_MAX * 2)

    def clean_name(self) -> str:
        return clean_name(self.cleaned_data.get("name") or "")
