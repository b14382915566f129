"""Where MCP Apps' Views run: a sandbox proxy page on an origin that is never Tessera's own
(the spec's "Sandbox proxy"), which loads the View's HTML into an inner frame under a
Content-Security-Policy built only from the page's declared domains.

The origin (docs/admin-guide/mcp-apps.md):
- `TESSERA_MCP_APPS_SANDBOX_ORIGIN` (a deployment): a host name of its own that reaches the same
  server; that host serves the proxy page and nothing else (`SandboxMiddleware`).
- unset (`make run`): the loopback split. A page on 127.0.0.1 frames Views from localhost on the
  same port, and a page on localhost frames them from 127.0.0.1: two sites, so neither Tessera's
  cookies nor its storage are the sandbox's. Any other address shows no Views until the
  setting is given.

The View's policy is the proxy page's own header, which the inner `srcdoc` frame inherits and
cannot shed; the inner frame is sandboxed with `allow-scripts` only (an opaque origin: no
cookies, no storage, no access to the proxy's DOM, no popups, forms or top navigation), with the
declared browser features in its `allow` attribute and nothing else.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core import signing
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseNotFound
from django.views.decorators.clickjacking import xframe_options_exempt
from django.views.decorators.http import require_GET

from .app_resources import PERMISSIONS

SALT = "tessera.mcp-apps.sandbox"
# Not under /mcp, which the ASGI router gives to Tessera's own MCP server (config/asgi.py).
SANDBOX_PATH = "/app-sandbox/"
LOOPBACK = ("127.0.0.1", "localhost")
# A sandbox host's first label: one `label()` makes, or a page's checked `domain`.
_LABEL = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
# The inner frame's sandbox: scripts, nothing more (see the module's docstring).
INNER_SANDBOX = "allow-scripts"
# The outer (proxy) frame's, as the spec requires: its own origin, so it can hold the inner one.
OUTER_SANDBOX = "allow-scripts allow-same-origin"
FEATURES = {
    "camera": "camera",
    "microphone": "microphone",
    "geolocation": "geolocation",
    "clipboardWrite": "clipboard-write",
}


def label(server_slug: str, domain: str = "") -> str:
    """The first label of a server's sandbox host: the one its page asked for (`_meta.ui.domain`,
    already checked: see `app_resources.clean_meta` and `chat.mcp_apps`), else one made from
    the server's slug, so no two servers' Views share an origin."""
    if domain:
        return domain
    return "app-" + hashlib.sha256(f"tessera-app:{server_slug}".encode()).hexdigest()[:16]


def sandbox_origin(request: HttpRequest, server_slug: str, domain: str = "") -> str:
    """The origin `server_slug`'s Views are framed from for a page served to `request` ("" when
    there is none): `<label>.` the wildcard of the configured origin, or of `localhost`."""
    configured: str = settings.MCP_APPS_SANDBOX_ORIGIN
    name = label(server_slug, domain)
    if configured:
        return configured.replace("*", name, 1) if "://*." in configured else configured
    host = request.get_host()
    hostname, _, port = host.partition(":")
    if hostname not in LOOPBACK:
        return ""
    return f"{request.scheme}://{name}.localhost{':' + port if port else ''}"


def page_origin(request: HttpRequest) -> str:
    return f"{request.scheme}://{request.get_host()}"


def frame_sources(request: HttpRequest) -> list[str]:
    """What Tessera's pages may frame: every server's sandbox origin (`frame-src`)."""
    configured: str = settings.MCP_APPS_SANDBOX_ORIGIN
    if configured:
        return [configured]
    hostname, _, port = request.get_host().partition(":")
    if hostname not in LOOPBACK:
        return []
    return [f"{request.scheme}://*.localhost{':' + port if port else ''}"]


def policy(meta: dict[str, Any]) -> dict[str, list[str]]:
    """The View's Content-Security-Policy, from its page's cleaned `_meta.ui.csp` (see
    `app_resources.clean_meta`): the spec's restrictive defaults, widened only by the domains
    declared for each purpose. Tighter than the spec's example where it costs Views nothing:
    no `connect-src 'self'` (the sandbox origin serves nothing to fetch), no form submissions."""
    declared = meta.get("csp")
    csp: dict[str, Any] = declared if isinstance(declared, dict) else {}
    resources = list(csp.get("resourceDomains") or [])
    connect = list(csp.get("connectDomains") or [])
    frames = list(csp.get("frameDomains") or [])
    bases = list(csp.get("baseUriDomains") or [])
    return {
        "default-src": ["'none'"],
        "script-src": ["'self'", "'unsafe-inline'", *resources],
        "style-src": ["'self'", "'unsafe-inline'", *resources],
        "img-src": ["'self'", "data:", *resources],
        "font-src": ["'self'", *resources],
        "media-src": ["'self'", "data:", *resources],
        "connect-src": connect or ["'none'"],
        "frame-src": frames or ["'none'"],
        "object-src": ["'none'"],
        "base-uri": bases or ["'self'"],
        "form-action": ["'none'"],
    }


def allow_attribute(meta: dict[str, Any]) -> str:
    """The frames' `allow` attribute: the browser features the page asked for, nothing else."""
    permissions = meta.get("permissions")
    asked: list[Any] = permissions if isinstance(permissions, list) else []
    return "; ".join(FEATURES[p] for p in PERMISSIONS if p in asked)


def proxy_url(request: HttpRequest, meta: dict[str, Any], origin: str) -> str:
    """The proxy page's address on `origin` for a View with `meta`, framed by the page of
    `request`; "" when this address has no sandbox origin."""
    if not origin:
        return ""
    token = signing.dumps(
        {
            "meta": {k: meta[k] for k in ("csp", "permissions") if k in meta},
            "host": page_origin(request),
            # The origin it was made for: a server's View is never served on another's.
            "origin": origin,
        },
        salt=SALT,
        compress=True,
    )
    return f"{origin}{SANDBOX_PATH}?p={token}"


@xframe_options_exempt
@require_GET
def proxy(request: HttpRequest) -> HttpResponse:
    """The sandbox proxy (served on the sandbox origin only). Its parameters are signed by the
    page that frames it: the View's cleaned metadata and the page's origin, the one window it
    talks to."""
    if not _on_sandbox_origin(request):
        raise Http404
    try:
        signed = signing.loads(request.GET.get("p", ""), salt=SALT)
        meta, host = signed["meta"], signed["host"]
        if signed["origin"] != f"{request.scheme}://{request.get_host()}":
            raise KeyError("origin")
    except (signing.BadSignature, KeyError, TypeError):
        return HttpResponse("This sandbox link is not valid.", status=400, content_type="text/plain")
    rules = policy(meta)
    rules["frame-ancestors"] = [host]
    settings_ = {"sandbox": INNER_SANDBOX, "allow": allow_attribute(meta)}
    response = HttpResponse(
        _PROXY.replace("__HOST__", _script_json(host)).replace("__SETTINGS__", _script_json(settings_))
    )
    response.headers["Content-Security-Policy"] = "; ".join(f"{k} {' '.join(v)}" for k, v in rules.items())
    response.headers["Cache-Control"] = "no-store"
    response.headers["Referrer-Policy"] = "no-referrer"
    return response


def _script_json(value: Any) -> str:
    # JSON inside a <script>: no "<" may close it.
    return json.dumps(value).replace("<", "\\u003c")


def _on_sandbox_origin(request: HttpRequest) -> bool:
    host = request.get_host()
    configured: str = settings.MCP_APPS_SANDBOX_ORIGIN
    if configured:
        netloc = urlsplit(configured).netloc
        if netloc.startswith("*."):
            name, _, rest = host.partition(".")
            return bool(_LABEL.match(name)) and rest == netloc[2:]
        return netloc == host
    name, _, rest = host.partition(".")
    return bool(_LABEL.match(name)) and rest.partition(":")[0] == "localhost"


class SandboxMiddleware:
    """The sandbox origin serves the proxy page and nothing else; Tessera's pages may frame it
    (their policy's `frame-src`). After Django's CSP middleware in MIDDLEWARE, so the policy it
    writes is the one this adds to."""

    def __init__(self, get_response: Any) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if _on_sandbox_origin(request) and request.path != SANDBOX_PATH:
            return HttpResponseNotFound("Not found.", content_type="text/plain")
        response: HttpResponse = self.get_response(request)
        if request.path != SANDBOX_PATH and not hasattr(response, "_csp_config"):
            origins = frame_sources(request)
            if origins and response.get("Content-Type", "").startswith("text/html"):
                response._csp_config = {**settings.SECURE_CSP, "frame-src": ["'self'", *origins]}  # type: ignore[attr-defined]
        return response


# The proxy: forwards JSON-RPC between the page (only `__HOST__`, only its parent window) and
# the View (only its own frame), keeping the `ui/notifications/sandbox-*` messages to itself.
# It creates no requests of its own (spec: "SHOULD NOT"). The inner frame is an opaque origin,
# so "*" is the only target a message to it can name.
_PROXY = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>App sandbox</title>
<style>html,body{margin:0;padding:0;height:100%;overflow:hidden;background:transparent}iframe{border:0;display:block;width:100%;height:100%}</style>
</head><body><script>
(() => {
  const host = __HOST__;
  const settings = __SETTINGS__;
  const reserved = (data) => typeof data.method === "string" && data.method.startsWith("ui/notifications/sandbox-");
  let inner = null;
  window.addEventListener("message", (event) => {
    const data = event.data;
    if (!data || typeof data !== "object" || data.jsonrpc !== "2.0") return;
    if (event.source === window.parent && event.origin === host) {
      if (data.method === "ui/notifications/sandbox-resource-ready") {
        if (inner || !data.params || typeof data.params.html !== "string") return;
        inner = document.createElement("iframe");
        inner.setAttribute("sandbox", settings.sandbox);
        if (settings.allow) inner.setAttribute("allow", settings.allow);
        inner.setAttribute("title", "App");
        inner.srcdoc = data.params.html;
        document.body.appendChild(inner);
      } else if (!reserved(data) && inner) {
        inner.contentWindow.postMessage(data, "*");
      }
    } else if (inner && event.source === inner.contentWindow && !reserved(data)) {
      window.parent.postMessage(data, host);
    }
  });
  window.parent.postMessage({ jsonrpc: "2.0", method: "ui/notifications/sandbox-proxy-ready", params: {} }, host);
})();
</script></body></html>
"""
