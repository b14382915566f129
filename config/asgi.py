import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

from core.asgi import get_application

# Django must be set up before anything imports models (the consumers do). Its middleware chain
# runs in one hop to the sync thread per request (core/asgi.py).
django_asgi_app = get_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from chat.routing import websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)
