from django.urls import path

import core.converters  # noqa: F401 - registers the <id:…> converter

from .consumers import AutomationConsumer, AutomationListConsumer

websocket_urlpatterns = [
    path("ws/automations/", AutomationListConsumer.as_asgi()),
    path("ws/automations/<id:automation_id>/", AutomationConsumer.as_asgi()),
]
