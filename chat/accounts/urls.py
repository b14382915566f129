from django.urls import include, path

from . import views

app_name = "accounts"

urlpatterns = [
    path("signup/", views.signup, name="signup"),
    path("account/", views.account, name="account"),
    path("account/password/", views.PasswordChange.as_view(), name="password_change"),
    path("account/password/done/", views.PasswordChangeDone.as_view(), name="password_change_done"),
]

# Single sign-on: allauth's OpenID Connect views (/accounts/oidc/<slug>/login/ and its callback),
# and Tessera's pages under the names allauth sends a browser to; these have no namespace,
# since allauth reverses them by bare name.
sso_urlpatterns = [
    path("accounts/", include("allauth.socialaccount.providers.openid_connect.urls")),
    path("accounts/sso/cancelled/", views.sso_cancelled, name="socialaccount_login_cancelled"),
    path("accounts/sso/signup/", views.sso_signup, name="socialaccount_signup"),
    path("accounts/sso/inactive/", views.account_inactive, name="account_inactive"),
]
