from django.urls import path

import core.converters  # noqa: F401 - registers the <id:…> converter

from . import views

app_name = "files"

urlpatterns = [
    path("", views.upload, name="upload"),
    path("<id:file_id>/", views.preview, name="preview"),
    path("<id:file_id>/status/", views.status, name="status"),
    path("<id:file_id>/download/", views.download, name="download"),
    path("<id:file_id>/thumbnail/", views.thumbnail, name="thumbnail"),
    path("<id:file_id>/image/", views.image, name="image"),
    path("<id:file_id>/delete/", views.delete, name="delete"),
]
