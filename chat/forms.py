"""Every field a chat view accepts, validated by a form: a bad value is a clear 400, never a
500 (Django's CharField also refuses NUL characters, which PostgreSQL cannot store)."""

from __future__ import annotations

from typing import Any

from django import forms

from .models import LLMModel

MAX_MESSAGE_LENGTH = 32_000
MAX_TITLE_LENGTH = 200


def first_error(form: forms.Form) -> str:
    """The form's problems as sentences for the person (each field's message is one)."""
    messages = [str(error) for errors in form.errors.values() for error in errors]
    return " ".join(dict.fromkeys(messages)) or "The form is not valid."


class ModelField(forms.ModelChoiceField):
    """A model the user may choose: enabled, and open to their groups. The form narrows the
    choices to the user's (`UserModelsMixin`); a model outside them is a form error (a 400)."""

    default_error_messages = {"invalid_choice": "Choose one of the available models."}

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(queryset=LLMModel.objects.none(), required=False, label="Model", **kwargs)


class UserModelsMixin:
    """For forms with a `model` field: `user_id=` is required, so no form offers every model."""

    fields: dict[str, Any]

    def __init__(self, *args: Any, user_id: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[call-arg]
        self.fields["model"].queryset = LLMModel.for_user(user_id)


class MessageForm(forms.Form):
    content = forms.CharField(
        label="Message",
        max_length=MAX_MESSAGE_LENGTH,
        error_messages={
            "required": "Type a message first.",
            "max_length": f"The message is too long (at most {MAX_MESSAGE_LENGTH:,} characters).",
        },
    )


class NewChatForm(UserModelsMixin, forms.Form):
    """The home page's first message; it may come without text (an empty new chat)."""

    content = forms.CharField(
        label="Message",
        required=False,
        max_length=MAX_MESSAGE_LENGTH,
        error_messages={"max_length": MessageForm.base_fields["content"].error_messages["max_length"]},
    )
    model = ModelField()
    # Set when the settings panel's values come along (chat.views.create_chat reads them).
    settings = forms.BooleanField(required=False)


class RegenerateForm(UserModelsMixin, forms.Form):
    """Empty model: the one the answer used."""

    model = ModelField()


class RenameForm(forms.Form):
    title = forms.CharField(
        label="Title",
        required=False,
        max_length=2 * MAX_TITLE_LENGTH,
        error_messages={"max_length": f"The title is too long (at most {MAX_TITLE_LENGTH} characters)."},
    )

    def clean_title(self) -> str:
        return " ".join(self.cleaned_data["title"].split())[:MAX_TITLE_LENGTH]


class ChatSettingsForm(UserModelsMixin, forms.Form):
    model = ModelField()
    limit_tool_iterations = forms.BooleanField(required=False)
    # Not submitted while its input is disabled (the limit switched off): the number is kept.
    max_tool_iterations = forms.IntegerField(
        label="Tool steps", required=False, error_messages={"invalid": "Tool steps must be a whole number."}
    )

    def __init__(self, *args: Any, cap: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.cap = cap

    def clean_max_tool_iterations(self) -> int | None:
        value = self.cleaned_data["max_tool_iterations"]
        if value is not None and not 1 <= value <= self.cap:
            raise forms.ValidationError(f"Choose a number from 1 to {self.cap}.")
        return value
