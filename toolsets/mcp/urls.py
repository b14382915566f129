from django.urls import path

from . import views

# Included by toolsets.urls (namespace "toolsets"), under /toolsets/mcp/.
urlpatterns = [
    path("callback/", views.callback, name="mcp_callback"),
    path("<slug:slug>/connect/", views.connect, name="mcp_connect"),
    path("<slug:slug>/disconnect/", views.disconnect, name="mcp_disconnect"),
    path("<slug:slug>/resource/", views.resource, name="mcp_resource"),
]
