from django.urls import path

import core.converters  # noqa: F401 - registers the <id:…> converter

from . import views

app_name = "notifications"
urlpatterns = [
    path("", views.centre, name="centre"),
    path("read-all/", views.read_all, name="read_all"),
    path("<id:note_id>/open/", views.open_note, name="open"),
]
