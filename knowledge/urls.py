from django.urls import path

import core.converters  # noqa: F401 - registers the <id:…> converter

from . import views

app_name = "knowledge"

urlpatterns = [
    path("", views.index, name="index"),
    path("new/", views.create, name="create"),
    path("<id:base_id>/", views.base, name="base"),
    path("<id:base_id>/documents/", views.documents, name="documents"),
    path("<id:base_id>/upload/", views.upload, name="upload"),
    path("<id:base_id>/page/", views.add_page, name="add_page"),
    path("<id:base_id>/resource/", views.add_resource, name="add_resource"),
    path("<id:base_id>/resources/", views.resource_list, name="resource_list"),
    path("<id:base_id>/refresh/", views.refresh_resources, name="refresh"),
    path("<id:base_id>/share/", views.share, name="share"),
    path("<id:base_id>/delete/", views.delete_base, name="delete"),
    path("documents/<id:document_id>/", views.document, name="document"),
    path("documents/<id:document_id>/delete/", views.delete_document, name="delete_document"),
]
