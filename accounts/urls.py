from django.urls import path

import core.converters  # noqa: F401 - registers the <id:…> converter

from . import views

app_name = "accounts"

urlpatterns = [
    path("signup/", views.signup, name="signup"),
    path("account/", views.account, name="account"),
    path("account/tokens/", views.create_token, name="create_token"),
    path("account/tokens/<id:token_id>/revoke/", views.revoke_token, name="revoke_token"),
    path("account/clients/<int:application_id>/disconnect/", views.disconnect_client, name="disconnect_client"),
    path("account/password/", views.PasswordChange.as_view(), name="password_change"),
    path("account/password/done/", views.PasswordChangeDone.as_view(), name="password_change_done"),
]

# Single sign-on: allauth's OpenID Connect views under allauth's names (/accounts/oidc/<slug>/login/
# and its callback, the redirect URI an admin registers), and Tessera's pages under the names
# allauth sends a browser to. No namespace: allauth reverses these by bare name.
sso_urlpatterns = [
    path("accounts/oidc/<str:provider_id>/login/", views.sso_begin, name="openid_connect_login"),
    path("accounts/oidc/<str:provider_id>/login/callback/", views.sso_callback, name="openid_connect_callback"),
    path("accounts/sso/cancelled/", views.sso_cancelled, name="socialaccount_login_cancelled"),
    path("accounts/sso/signup/", views.sso_signup, name="socialaccount_signup"),
    path("accounts/sso/inactive/", views.account_inactive, name="account_inactive"),
]
