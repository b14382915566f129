from __future__ import annotations

from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile


@pytest.fixture
def attach_file(db: Any) -> Any:
    """Uploads bytes for a user, reads them as the worker would, and sends them with a message
    in a chat of theirs; returns the Attachment."""
    from chat.models import Chat, Message
    from toolsets.files import attach
    from toolsets.files.models import Attachment, FileLimits
    from toolsets.files.tasks import read_attachment

    def make(user: Any, name: str, data: bytes, *, chat: Any = None, send: bool = True) -> Attachment:
        attachment = attach.accept(user.pk, SimpleUploadedFile(name, data), FileLimits.load())
        read_attachment(attachment.pk)
        attachment.refresh_from_db()
        if send:
            chat = chat or Chat.objects.create(owner=user)
            message = Message.objects.create(chat=chat, role=Message.Role.USER, content="Here it is")
            attach.link([attachment], message)
            attachment.refresh_from_db()
        return attachment

    return make
