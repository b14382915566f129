from django.contrib import admin
from django.http import HttpRequest, HttpResponsePermanentRedirect
from django.templatetags.static import static
from django.urls import include, path

from accounts import views as account_views
from accounts.urls import sso_urlpatterns
from chat import overview
from core import health
from hub import execution
from toolsets.mcp import app_sandbox
from toolsets.mcp import views as mcp_views


def favicon(request: HttpRequest) -> HttpResponsePermanentRedirect:
    # Named per request, not when this module is imported: importing the URLs (a `reverse()` in a
    # management command, a test's collection) must not load the static files' manifest, which
    # may not be built yet, or be built again later by the same process.
    return HttpResponsePermanentRedirect(static("img/logo.svg"))


urlpatterns = [
    path("favicon.ico", favicon),
    # Probes and metrics: no session, no CSRF (core/health.py).
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("metrics", health.metrics, name="metrics"),
    path("admin/overview/", admin.site.admin_view(overview.overview), name="admin-overview"),
    path("admin/", admin.site.urls),
    path("login/", account_views.Login.as_view(), name="login"),
    # The same page under the name allauth redirects to.
    path("login/", account_views.Login.as_view(), name="account_login"),
    path("logout/", account_views.logout, name="logout"),
    *sso_urlpatterns,
    # Tessera's OAuth client ID at MCP servers' authorization servers (Client ID Metadata
    # Document): a short, stable URL at the root, as clients usually publish it.
    path("client-metadata.json", mcp_views.client_metadata, name="mcp_client_metadata"),
    # MCP Apps' sandbox proxy, answered on the sandbox origin only (toolsets/mcp/app_sandbox.py).
    path(app_sandbox.SANDBOX_PATH.strip("/") + "/", app_sandbox.proxy, name="mcp_app_sandbox"),
    # The execution API (hub/execution.py), under the toolsets it runs.
    path("toolsets/<str:toolset_id>/execute/<str:method>", execution.execute, name="execution-api"),
    path("toolsets/", include("toolsets.urls")),
    # The OpenAI-compatible API (hub/openai.py), served by Django's async handler.
    path("v1/", include("hub.urls")),
    # Tessera as the OAuth authorization server of /mcp (hub/oauth.py).
    path("", include("hub.oauth_urls")),
    path("files/", include("toolsets.files.urls")),
    path("search/", include("chat.search.urls")),
    path("knowledge/", include("knowledge.urls")),
    path("", include("artifacts.urls")),
    path("account/memory/", include("memory.urls")),
    path("notifications/", include("notifications.urls")),
    path("automations/", include("automations.urls")),
    path("", include("accounts.urls")),
    path("", include("chat.urls")),
]
