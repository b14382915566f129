from __future__ import annotations

from django.urls import path

import core.converters  # noqa: F401 - registers the <id:…> converter

from . import views

app_name = "artifacts"

urlpatterns = [
    path("chats/<id:chat_id>/artifacts/<id:artifact_id>/", views.panel, name="panel"),
    path("chats/<id:chat_id>/artifacts/<id:artifact_id>/document", views.document, name="document"),
    path("chats/<id:chat_id>/artifacts/<id:artifact_id>/download", views.download, name="download"),
    path("chats/<id:chat_id>/artifacts/<id:artifact_id>/versions", views.save, name="save"),
]
