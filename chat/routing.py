from django.urls import path

import core.converters  # noqa: F401 - registers the <id:…> converter

from .consumers import ChatConsumer

websocket_urlpatterns = [
    path("ws/chats/<id:chat_id>/", ChatConsumer.as_asgi()),
]
