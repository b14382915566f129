"""The web process: Daphne, with per-message compression on the chat sockets.

    python -m config.web -b 0.0.0.0 -p 8000 config.asgi:application   (Daphne's own options)

Daphne's websocket server (autobahn) implements permessage-deflate, but Daphne never switches it
on. A streaming answer sends a small fragment every 50 ms, each with the same markup around a
few words; with deflate and context takeover the bytes on the wire drop to about a fifth
(bench/RESULTS.md). Every current browser offers the extension; a client that does not simply
gets uncompressed frames.

On SIGTERM the process closes every chat socket with 1012 ("service restart") before it stops:
the page reconnects at once (to another web process behind the balancer, or to this one once it
is back) and asks for the state of its running turns, so a reader loses nothing.
"""

from __future__ import annotations

if __name__ == "__main__":
    from config import reactor as _reactor

    _reactor.install()  # before Daphne is imported (config/reactor.py)

import gc
import logging
from pathlib import Path
from typing import Any

from autobahn.websocket.compress import PerMessageDeflateOffer, PerMessageDeflateOfferAccept
from daphne.cli import CommandLineInterface
from daphne.server import Server
from daphne.ws_protocol import WebSocketProtocol
from twisted.internet import defer, reactor, task

# zlib keeps 2**(WINDOW_BITS + 2) + 2**(MEM_LEVEL + 9) bytes per compressing socket: 32 kB here
# instead of the default 256 kB, and only once a socket has sent something. Fragments repeat
# markup from the last few frames, so a 4 kB window loses little.
WINDOW_BITS = 12
MEM_LEVEL = 5
CLOSE_RESTARTING = 1012  # chat.consumers.CLOSE_RESTARTING; importing it would load Django here
# How long a stopping process waits for browsers to answer its close frames.
CLOSE_WAIT_S = 1.0
# Successful probes every few seconds would drown the access log.
QUIET_PATHS = ("/healthz", "/readyz", "/metrics")
access_log = logging.getLogger("tessera.access")


def log_access(protocol: Any, action: str, details: dict[str, Any]) -> None:
    """Daphne's access log, as log records (JSON with LOG_FORMAT=json) instead of lines on
    stdout, and without query strings: a search's words are the reader's, not the log's."""
    if protocol == "http" and action == "complete":
        path = str(details.get("path", "")).split("?", 1)[0]
        status = details.get("status")
        if path in QUIET_PATHS and status == 200:
            return
        fields = {
            "method": details.get("method"),
            "path": path,
            "status": status,
            "size": details.get("size"),
            "client": details.get("client"),
        }
        access_log.info("%s %s %s", fields["method"], path, status, extra=fields)
    elif protocol == "websocket" and action in ("connected", "rejected", "disconnected"):
        path = str(details.get("path", "")).split("?", 1)[0]
        access_log.info("WebSocket %s %s", action, path, extra={"path": path, "event": action})


def accept_deflate(offers: list[Any]) -> PerMessageDeflateOfferAccept | None:
    for offer in offers:
        if isinstance(offer, PerMessageDeflateOffer):
            return PerMessageDeflateOfferAccept(
                offer,
                # Client-to-server messages are tiny (Stop, a sync request): bound their window too.
                request_max_window_bits=WINDOW_BITS if offer.accept_max_window_bits else 0,
                window_bits=min(WINDOW_BITS, offer.request_max_window_bits or WINDOW_BITS),
                mem_level=MEM_LEVEL,
            )
    return None


class CompressingServer(Server):  # type: ignore[misc]
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        then = kwargs.pop("ready_callable", None)
        if kwargs.get("action_logger") is not None:
            kwargs["action_logger"] = log_access

        def ready() -> None:
            # Called once the websocket factory exists, before the server starts listening.
            self.ws_factory.setProtocolOptions(perMessageCompressionAccept=accept_deflate)
            reactor.addSystemEventTrigger("before", "shutdown", self.close_sockets)  # type: ignore[arg-type]
            freeze_startup_objects()
            if then is not None:
                then()

        super().__init__(*args, ready_callable=ready, **kwargs)

    def close_sockets(self) -> defer.Deferred[None] | None:
        """Shutdown: every open websocket is closed with "service restart"."""
        sockets = [
            protocol
            for protocol in self.connections
            if isinstance(protocol, WebSocketProtocol) and protocol.state == WebSocketProtocol.STATE_OPEN
        ]
        for protocol in sockets:
            # sendClose() allows only 1000 and 3000-4999; 1012 is a registered code (RFC 6455
            # section 7.4, IANA) that browsers accept, sent through autobahn's frame-level call.
            protocol.sendCloseFrame(code=CLOSE_RESTARTING, reasonUtf8=b"Server restarting")
        if not sockets:
            return None
        return task.deferLater(reactor, CLOSE_WAIT_S, lambda: None)


def freeze_startup_objects() -> None:
    """Loads the URLconf (every view and what it imports), then moves everything alive into the
    collector's permanent generation: those objects live as long as the process, and a full
    collection walking them stopped every socket of the process for up to 200 ms at a time in
    the benchmark (bench/RESULTS.md)."""
    from django.conf import settings
    from django.template import TemplateDoesNotExist, TemplateSyntaxError
    from django.template.loader import get_template
    from django.urls import get_resolver

    get_resolver().url_patterns  # noqa: B018 - imports the views
    # The site's own templates, compiled now (the cached loader keeps them): otherwise the first
    # requests compile them after the freeze, and every full collection walks their nodes.
    folders: list[Path] = settings.TEMPLATES[0]["DIRS"]  # type: ignore[assignment]
    for folder in folders:
        for path in sorted(Path(folder).rglob("*.html")):
            try:
                get_template(str(path.relative_to(folder)))
            except (TemplateDoesNotExist, TemplateSyntaxError):  # an admin override needing its base
                continue
    gc.collect()
    gc.freeze()


class WebCommand(CommandLineInterface):  # type: ignore[misc]
    server_class = CompressingServer


if __name__ == "__main__":
    from config import bodies, tcp

    tcp.install()  # connections write at once (config/tcp.py)
    bodies.install()  # bodies over their limit are refused as they arrive (config/bodies.py)
    WebCommand.entrypoint()
