"""Secret fields in forms (core/secrets_form.py): never rendered back, shown only as a mask,
left as they were when submitted blank, removed when "clear" is ticked."""

from __future__ import annotations

from typing import Any

import pytest
from django import forms

from chat.admin import LLMModelForm
from chat.models import LLMModel
from core.crypto import mask
from core.secrets_form import SecretFieldsMixin, SecretInput
from toolsets.admin import ToolsetConfigForm

pytestmark = pytest.mark.django_db

KEY = "sk-live-0123456789abcdef"


class KeyForm(SecretFieldsMixin):
    secret_fields = ("api_key",)

    class Meta:
        model = LLMModel
        fields = ["name", "model", "api_key"]


@pytest.fixture
def keyed() -> LLMModel:
    return LLMModel.objects.create(name="GPT", model="openai/gpt-4o", api_key=KEY)


def submit(instance: LLMModel | None, **data: Any) -> LLMModel:
    form = KeyForm(data={"name": "GPT", "model": "openai/gpt-4o", **data}, instance=instance)
    assert form.is_valid(), form.errors
    form.save()
    return LLMModel.objects.get(pk=form.instance.pk)


def test_a_stored_secret_is_never_rendered_back(keyed: LLMModel) -> None:
    html = str(KeyForm(instance=keyed))

    assert KEY not in html and KEY[-8:] not in html
    assert mask(KEY) in html and mask(KEY) == "••••cdef"
    assert 'type="password"' in html and 'autocomplete="new-password"' in html


def test_a_stored_secret_is_shown_as_a_mask_with_a_way_to_clear_it(keyed: LLMModel) -> None:
    form = KeyForm(instance=keyed)
    field = form.fields["api_key"]

    assert isinstance(field.widget, SecretInput) and not field.required
    assert field.widget.attrs["placeholder"] == "••••cdef"
    assert "••••cdef" in field.help_text and "Leave blank to keep it" in field.help_text
    assert isinstance(form.fields["clear_api_key"], forms.BooleanField)
    assert not form.fields["clear_api_key"].required


def test_without_a_secret_there_is_nothing_to_clear() -> None:
    form = KeyForm()

    assert form.fields["api_key"].widget.attrs["placeholder"] == "Not set"
    assert "clear_api_key" not in form.fields


def test_a_bound_form_does_not_echo_a_typed_secret(keyed: LLMModel) -> None:
    form = KeyForm(data={"name": "", "model": "openai/gpt-4o", "api_key": "sk-typed-but-invalid"}, instance=keyed)

    assert not form.is_valid()  # shown again with its errors
    assert "sk-typed-but-invalid" not in str(form)


def test_submitting_the_field_blank_keeps_the_stored_secret(keyed: LLMModel) -> None:
    assert submit(keyed, api_key="").api_key == KEY


def test_a_new_value_replaces_the_stored_secret(keyed: LLMModel) -> None:
    assert submit(keyed, api_key="sk-new-value-9999").api_key == "sk-new-value-9999"


def test_ticking_clear_removes_the_stored_secret(keyed: LLMModel) -> None:
    assert submit(keyed, api_key="", clear_api_key="on").api_key == ""


def test_clear_wins_over_a_value_typed_at_the_same_time(keyed: LLMModel) -> None:
    assert submit(keyed, api_key="sk-typed-too", clear_api_key="on").api_key == ""


def test_a_new_object_may_be_saved_with_or_without_a_secret() -> None:
    assert submit(None, api_key="").api_key == ""
    assert submit(None, api_key="sk-first-key-0000").api_key == "sk-first-key-0000"


def test_a_short_secret_is_masked_whole() -> None:
    short = LLMModel.objects.create(name="Local", model="ollama/llama3", api_key="abc123")

    placeholder = KeyForm(instance=short).fields["api_key"].widget.attrs["placeholder"]

    assert placeholder == "••••" and "abc" not in placeholder


@pytest.mark.parametrize("form_class", [LLMModelForm, ToolsetConfigForm])
def test_the_admin_forms_treat_api_keys_as_secrets(form_class: type[forms.ModelForm]) -> None:
    field = form_class().fields["api_key"]

    assert isinstance(field.widget, SecretInput) and not field.required
