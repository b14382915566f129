from django.urls import path

import core.converters  # noqa: F401 - registers the <id_or_new:…> converter

from . import composer_views, views

# Included by toolsets.urls (namespace "toolsets"), under /toolsets/mcp/.
urlpatterns = [
    path("callback/", views.callback, name="mcp_callback"),
    path("<slug:slug>/connect/", views.connect, name="mcp_connect"),
    path("<slug:slug>/disconnect/", views.disconnect, name="mcp_disconnect"),
    path("<slug:slug>/resource/", views.resource, name="mcp_resource"),
    # The composer's prompt menu and resource picker, for one chat, or ("new") for the chat the
    # home page would create.
    path("chats/<id_or_new:chat_id>/prompts/", composer_views.prompt_menu, name="mcp_prompts"),
    path("chats/<id_or_new:chat_id>/resources/", composer_views.resource_picker, name="mcp_resources"),
    path("chats/<id_or_new:chat_id>/<slug:slug>/prompt/", composer_views.prompt_form, name="mcp_prompt_form"),
    path("chats/<id_or_new:chat_id>/<slug:slug>/prompt/use/", composer_views.use_prompt, name="mcp_prompt_use"),
    path("chats/<id_or_new:chat_id>/<slug:slug>/complete/", composer_views.complete, name="mcp_complete"),
    path("chats/<id_or_new:chat_id>/<slug:slug>/attach/", composer_views.attach_resource, name="mcp_attach"),
]
