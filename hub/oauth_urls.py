"""The authorization server's endpoints (hub/oauth.py, oauth_clients.py), in DOT's URL
namespace so that its metadata view finds them. The well-known documents are at the root, as RFC 8414 and RFC 9728
place them."""

from django.urls import path
from oauth2_provider import views as dot

from . import oauth, oauth_clients

app_name = "oauth2_provider"

urlpatterns = [
    path(
        ".well-known/oauth-authorization-server",
        oauth.public(dot.OAuthServerMetadataView.as_view()),
        name="oauth-server-metadata",
    ),
    path(
        ".well-known/oauth-protected-resource",
        oauth.public(oauth.ProtectedResourceMetadata.as_view()),
        name="oauth-resource-metadata",
    ),
    path(
        ".well-known/oauth-protected-resource/<path:resource_path>",
        oauth.public(oauth.ProtectedResourceMetadata.as_view()),
        name="oauth-resource-metadata-path",
    ),
    path("oauth/authorize/", oauth.public(oauth.Consent.as_view()), name="authorize"),
    path("oauth/token/", oauth.public(oauth.Token.as_view()), name="token"),
    path("oauth/revoke/", oauth.public(dot.RevokeTokenView.as_view(), always=True), name="revoke-token"),
    path("oauth/register/", oauth.public(oauth_clients.Registration.as_view()), name="dcr-register"),
    # RFC 7592: the client reads, updates or deletes its registration with the token it got.
    path(
        "oauth/register/<str:client_id>/",
        oauth.public(oauth_clients.RegistrationManagement.as_view()),
        name="dcr-register-management",
    ),
]
