import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

from core.asgi import BodyLimit, get_application

# Django must be set up before anything imports models (the consumers do). Its middleware chain
# runs in one hop to the sync thread per request (core/asgi.py).
django_asgi_app = get_application()

from django.core.handlers.asgi import ASGIHandler  # noqa: E402

from core import tracing  # noqa: E402
from core.asgi import PathRouter  # noqa: E402
from hub.mcp_endpoint import endpoint as mcp_endpoint  # noqa: E402

# Traces, when an OTLP endpoint is configured (core/tracing.py); nothing otherwise.
tracing.setup("web")

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from automations.routing import websocket_urlpatterns as automation_sockets  # noqa: E402
from chat.routing import websocket_urlpatterns  # noqa: E402
from core.origins import SameOriginValidator  # noqa: E402
from notifications.routing import websocket_urlpatterns as notification_sockets  # noqa: E402

application = ProtocolTypeRouter(
    {
        # Every body is capped before Django buffers it (core/asgi.py).
        # The OpenAI-compatible API's views are coroutines that wait for a turn for as long as it
        # runs: Django's own async handler serves them on the event loop (hub/openai.py).
        # Tessera's MCP server (hub/mcp_server.py) is the SDK's own ASGI app.
        "http": BodyLimit(PathRouter({"/v1/": ASGIHandler(), "/mcp": mcp_endpoint}, default=django_asgi_app)),
        # A socket only from the page's own origin: scheme, host and port (core/origins.py).
        "websocket": SameOriginValidator(
            AuthMiddlewareStack(URLRouter(websocket_urlpatterns + notification_sockets + automation_sockets))
        ),
    }
)
