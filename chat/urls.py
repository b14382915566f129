from django.urls import path

import core.converters  # noqa: F401 - registers the <id:…> and <id_or_new:…> converters

from . import (
    manage,
    mcp_apps,
    mcp_composer,
    pending_views,
    question_views,
    share_artifacts,
    shares,
    turn_views,
    views,
)

app_name = "chat"

urlpatterns = [
    # The composer's MCP prompt menu and resource picker (chat/mcp_composer.py), for one chat, or
    # ("new") for the chat the home page would create.
    path("toolsets/mcp/chats/<id_or_new:chat_id>/prompts/", mcp_composer.prompt_menu, name="mcp_prompts"),
    path("toolsets/mcp/chats/<id_or_new:chat_id>/resources/", mcp_composer.resource_picker, name="mcp_resources"),
    path(
        "toolsets/mcp/chats/<id_or_new:chat_id>/<slug:slug>/prompt/", mcp_composer.prompt_form, name="mcp_prompt_form"
    ),
    path(
        "toolsets/mcp/chats/<id_or_new:chat_id>/<slug:slug>/prompt/use/", mcp_composer.use_prompt, name="mcp_prompt_use"
    ),
    path("toolsets/mcp/chats/<id_or_new:chat_id>/<slug:slug>/complete/", mcp_composer.complete, name="mcp_complete"),
    path("toolsets/mcp/chats/<id_or_new:chat_id>/<slug:slug>/attach/", mcp_composer.attach_resource, name="mcp_attach"),
    # MCP Apps: a card's View and what it asks of Tessera (chat/mcp_apps.py).
    path("apps/<id:execution_id>/", mcp_apps.view, name="mcp_app"),
    path("apps/chat/<id:chat_id>/<str:name>/", mcp_apps.tool_view, name="mcp_app_tool"),
    path("apps/<id:execution_id>/call/", mcp_apps.call_tool, name="mcp_app_call"),
    path("apps/<id:execution_id>/read/", mcp_apps.read_resource, name="mcp_app_read"),
    path("apps/<id:execution_id>/context/", mcp_apps.update_context, name="mcp_app_context"),
    path("s/<token:token>/apps/<id:execution_id>/", mcp_apps.shared_view, name="shared_mcp_app"),
    path("", views.home, name="home"),
    path("chats/new/", views.create_chat, name="create"),
    path("chats/<id:chat_id>/", views.chat_detail, name="detail"),
    path("chats/<id:chat_id>/messages/", views.send_message, name="send"),
    path("chats/<id:chat_id>/earlier/", views.earlier, name="earlier"),
    path("chats/<id:chat_id>/stop/", views.stop, name="stop"),
    path("chats/<id:chat_id>/steer/", pending_views.steer, name="steer"),
    path("chats/<id:chat_id>/pending/<id:pending_id>/edit/", pending_views.edit, name="pending_edit"),
    path("chats/<id:chat_id>/pending/<id:pending_id>/cancel/", pending_views.cancel, name="pending_cancel"),
    path("chats/<id:chat_id>/pending/<id:pending_id>/send/", pending_views.send_now, name="pending_send"),
    path("chats/<id:chat_id>/rename/", views.rename, name="rename"),
    path("chats/<id:chat_id>/delete/", views.delete, name="delete"),
    path("chats/<id:chat_id>/tools/", views.update_tools, name="tools"),
    path("chats/<id:chat_id>/settings/", views.update_settings, name="settings"),
    path("chats/tools/", views.update_default_tools, name="default_tools"),
    path("chats/manage/", manage.manage, name="manage"),
    path("chats/delete/", manage.delete_many, name="delete_many"),
    path("chats/<id:chat_id>/export.md", manage.export_markdown, name="export_md"),
    path("chats/<id:chat_id>/share/", shares.share_chat, name="share"),
    path("shares/<id:share_id>/revoke/", shares.revoke_share, name="share_revoke"),
    path("s/<token:token>/", shares.shared_chat, name="shared"),
    path("s/<token:token>/continue/", shares.continue_share, name="share_continue"),
    path("s/<token:token>/files/<id:file_id>/", shares.shared_file, name="shared_file"),
    path("s/<token:token>/artifacts/<id:artifact_id>/", share_artifacts.panel, name="shared_artifact"),
    path(
        "s/<token:token>/artifacts/<id:artifact_id>/document", share_artifacts.document, name="shared_artifact_document"
    ),
    path(
        "s/<token:token>/artifacts/<id:artifact_id>/download", share_artifacts.download, name="shared_artifact_download"
    ),
    path("chats/<id:chat_id>/export.json", manage.export_json, name="export_json"),
    path("chats/settings/", views.draft_settings, name="draft_settings"),
    path("turns/<id:turn_id>/continue/", turn_views.continue_answer, name="continue"),
    path("turns/<id:turn_id>/edit/", turn_views.edit_message, name="edit"),
    path("turns/<id:turn_id>/regenerate/", turn_views.regenerate, name="regenerate"),
    path("turns/<id:turn_id>/choose/", turn_views.choose_version, name="choose"),
    path("turns/<id:turn_id>/markdown/", turn_views.answer_markdown, name="markdown"),
    # Every question to the person (core.questions) is answered at one URL, whatever its kind;
    # the older per-kind URLs answer their kind only (links and scripts that name them).
    path("questions/<str:question_id>/", question_views.answer, name="question"),
    path("approvals/<str:question_id>/", question_views.answer, {"kind": "approval"}, name="approval"),
    path("elicitations/<str:question_id>/", question_views.answer, {"kind": "elicitation"}, name="elicitation"),
    # The approval page an MCP client opens for its user (hub/mcp_ask.py).
    path("approvals/<str:approval_id>/review/", question_views.review, name="approval_review"),
]
