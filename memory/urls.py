from django.urls import path

import core.converters  # noqa: F401 - registers the <id:…> converter

from . import views

app_name = "memory"

urlpatterns = [
    path("new/", views.add, name="add"),
    path("switch/", views.switch, name="switch"),
    path("export.<str:kind>", views.export, name="export"),
    path("<id:memory_id>/", views.edit, name="edit"),
    path("<id:memory_id>/delete/", views.delete, name="delete"),
]
