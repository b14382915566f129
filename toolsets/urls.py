from django.urls import include, path

import core.converters  # noqa: F401 - registers the <id:…> converter

from . import views

app_name = "toolsets"

urlpatterns = [
    path("", views.settings_page, name="settings"),
    path("executions/<id:execution_id>/", views.execution_detail, name="execution"),
    path("mcp/", include("toolsets.mcp.urls")),
    path("<str:toolset_id>/enabled/", views.set_enabled, name="set_enabled"),
    path("<str:toolset_id>/key/", views.save_key, name="save_key"),
    path("<str:toolset_id>/policy/", views.set_tool_policy, name="set_tool_policy"),
    path("<str:toolset_id>/setup/", views.run_setup, name="setup"),
]
