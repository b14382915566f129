from django.urls import path

from . import views

app_name = "chat"

urlpatterns = [
    path("", views.home, name="home"),
    path("chats/new/", views.create_chat, name="create"),
    path("chats/<int:chat_id>/", views.chat_detail, name="detail"),
    path("chats/<int:chat_id>/messages/", views.send_message, name="send"),
    path("chats/<int:chat_id>/earlier/", views.earlier, name="earlier"),
    path("chats/<int:chat_id>/stop/", views.stop, name="stop"),
    path("chats/<int:chat_id>/rename/", views.rename, name="rename"),
    path("chats/<int:chat_id>/delete/", views.delete, name="delete"),
    path("chats/<int:chat_id>/tools/", views.update_tools, name="tools"),
    path("chats/<int:chat_id>/settings/", views.update_settings, name="settings"),
    path("chats/tools/", views.update_default_tools, name="default_tools"),
]
