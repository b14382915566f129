from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from chat.models import Chat
from knowledge.models import ChatBase

pytestmark = pytest.mark.django_db


def test_the_popover_attaches_only_visible_bases_and_detaches_unticked(
    user: Any, other_user: Any, make_base: Any
) -> None:
    mine, also = make_base(user, "Mine"), make_base(user, "Also")
    theirs = make_base(other_user, "Theirs")
    chat = Chat.objects.create(owner=user)
    client = Client()
    client.force_login(user)

    page = client.get(reverse("chat:detail", args=[chat.pk])).content.decode()
    assert 'data-testid="kb-attach"' in page and "Theirs" not in page

    url = reverse("chat:tools", args=[chat.pk])
    posted = {"kb-form": "1", "kb": [str(mine.pk), str(theirs.pk), "x", "9" * 30]}
    assert client.post(url, posted).status_code == 200
    assert set(ChatBase.objects.filter(chat=chat).values_list("base_id", flat=True)) == {mine.pk}

    client.post(url, {"kb-form": "1", "kb": [str(also.pk)]})
    assert set(ChatBase.objects.filter(chat=chat).values_list("base_id", flat=True)) == {also.pk}

    client.post(url, {"tools": []})  # a form without the bases (no bases listed) leaves them
    assert ChatBase.objects.filter(chat=chat).count() == 1
