from django.urls import path

from . import views

app_name = "accounts"

urlpatterns = [
    path("signup/", views.signup, name="signup"),
    path("account/", views.account, name="account"),
    path("account/clients/<int:application_id>/disconnect/", views.disconnect_client, name="disconnect_client"),
    path("account/password/", views.PasswordChange.as_view(), name="password_change"),
    path("account/password/done/", views.PasswordChangeDone.as_view(), name="password_change_done"),
]
