from django.contrib import admin
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView

from chat.accounts import views as account_views
from chat.accounts.urls import sso_urlpatterns
from core import health, overview

urlpatterns = [
    path("favicon.ico", RedirectView.as_view(url=static("img/logo.svg"), permanent=True)),
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
    path("toolsets/", include("toolsets.urls")),
    # The OpenAI-compatible API (chat/api/openai.py), served by Django's async handler.
    path("v1/", include("chat.api.urls")),
    # Tessera as the OAuth authorization server of /mcp (chat/api/oauth.py).
    path("", include("chat.api.oauth_urls")),
    path("files/", include("toolsets.files.urls")),
    path("search/", include("chat.search.urls")),
    path("", include("chat.accounts.urls")),
    path("", include("chat.urls")),
]
