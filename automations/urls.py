from django.urls import path

import core.converters  # noqa: F401 - registers the <id:…> converter

from . import views, webhooks

app_name = "automations"
urlpatterns = [
    path("", views.index, name="index"),
    path("new/", views.create, name="create"),
    path("preview/", views.preview, name="preview"),
    path("hooks/<token:key>/", webhooks.receive, name="webhook"),
    path("<id:automation_id>/", views.detail, name="detail"),
    path("<id:automation_id>/edit/", views.edit, name="edit"),
    path("<id:automation_id>/run/", views.run_now, name="run_now"),
    path("<id:automation_id>/rotate/", views.rotate_secret, name="rotate"),
    path("<id:automation_id>/delete/", views.delete, name="delete"),
]
