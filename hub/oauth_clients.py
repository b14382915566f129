"""How clients of Tessera's authorization server (hub/oauth.py) come to be known: dynamic
registration (RFC 7591) and its updates (RFC 7592), held to one set of rules, and Client ID
Metadata Documents (a client_id that is an https URL, fetched here).

A metadata document is fetched on the pre-auth path (authorize, token, revoke) by anyone naming
a URL, so the fetch is bounded three ways: one deadline for the whole fetch (connect, headers
and every byte of the body: a document dripping a byte every few seconds ends there), a few
fetches at once per requesting address (so one address cannot hold every one of DOT's
in-flight slots and make every other CIMD client "unknown"), and DOT's own per-process cap.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
import threading
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import httpx
from asgiref.sync import async_to_sync
from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from oauth2_provider import cimd
from oauth2_provider.views import DynamicClientRegistrationManagementView, DynamicClientRegistrationView

from core import ratelimit
from core.http import client_address
from toolsets.base import ToolFailure
from toolsets.web import safety

DOCUMENT_MAX_BYTES = 16 * 1024
LOOPBACK_HOSTS = {"localhost", "127.0.0.1", "::1", "[::1]"}


# --- Redirect URIs and client metadata -------------------------------------------------------


def redirect_uri_problem(uri: str) -> str | None:
    """Why a client may not use this redirect URI, or None: https anywhere; http only to a
    loopback host, where a native client listens (RFC 8252 §7.3, OAuth 2.1 §2.3.1)."""
    try:
        parts = urlsplit(uri)
        parts.port  # noqa: B018 - an out-of-range port raises here
    except ValueError:
        return f"{uri!r} is not a URL"
    if parts.fragment or parts.username or parts.password:
        return f"{uri!r} must not carry a fragment or credentials"
    if parts.scheme == "https" and parts.hostname:
        return None
    if parts.scheme == "http" and (parts.hostname or "") in LOOPBACK_HOSTS:
        return None
    return f"{uri!r} must be https, or http on a loopback address (127.0.0.1, [::1], localhost)"


def metadata_problem(data: dict[str, Any]) -> tuple[str, str] | None:
    """(error code, description) when client metadata breaks Tessera's rules, else None. One
    check for a registration and for every later update of it (RFC 7592), so that an update
    cannot bring in what registration refuses."""
    uris = data.get("redirect_uris")
    if not isinstance(uris, list) or not uris:
        return "invalid_redirect_uri", "redirect_uris must be a non-empty array."
    for uri in uris:
        problem = redirect_uri_problem(uri) if isinstance(uri, str) else "a redirect URI is not a string"
        if problem:
            return "invalid_redirect_uri", problem
    # An MCP client signs a user in: the code flow, and refreshing what it got.
    grants = data.get("grant_types", ["authorization_code"])
    if not isinstance(grants, list) or not set(map(str, grants)) <= {"authorization_code", "refresh_token"}:
        return "invalid_client_metadata", "grant_types may only be authorization_code and refresh_token."
    responses = data.get("response_types", ["code"])
    if not isinstance(responses, list) or not set(map(str, responses)) <= {"code"}:
        return "invalid_client_metadata", "response_types may only be code."
    name = data.get("client_name")
    if name is not None and (not isinstance(name, str) or len(name) > 255):
        return "invalid_client_metadata", "client_name must be a string of at most 255 characters."
    return None


def _metadata_error(request: HttpRequest) -> JsonResponse | None:
    try:
        data = json.loads(request.body or b"{}")
    except ValueError:
        return None  # DOT answers a body that is not JSON itself
    if not isinstance(data, dict):
        return None  # likewise a body that is not an object
    problem = metadata_problem(data)
    return registration_error(problem[1], 400, problem[0]) if problem else None


def registration_error(description: str, status: int, error: str = "invalid_client_metadata") -> JsonResponse:
    return JsonResponse({"error": error, "error_description": description}, status=status)


class Registration(DynamicClientRegistrationView):
    """RFC 7591, open to anyone (a client registers before anyone signs in; nothing is reached
    until a user consents), a few registrations per address an hour, and redirect URIs held to
    the same rule as metadata documents'."""

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        address = client_address(request)
        if not ratelimit.allow("oauth-register", address, settings.OAUTH_REGISTRATIONS_PER_HOUR, window_s=3600):
            return registration_error("Too many registrations from your address. Try again in an hour.", 429)
        return _metadata_error(request) or super().post(request, *args, **kwargs)


class RegistrationManagement(DynamicClientRegistrationManagementView):
    """RFC 7592: the client reads, updates or deletes its registration with the token it got.
    An update is held to registration's rules (DOT would take any redirect URI its settings
    allow, plain http to any host included)."""

    def put(self, request: HttpRequest, client_id: str, *args: Any, **kwargs: Any) -> HttpResponse:
        # Who asks first: a caller without the registration token learns nothing from a 400.
        refused = self._authenticate_registration_request(request, client_id)
        if isinstance(refused, HttpResponse):
            return refused
        return _metadata_error(request) or super().put(request, client_id, *args, **kwargs)


# --- Client ID Metadata Documents -------------------------------------------------------------


class _InFlight:
    """Fetches under way per requesting address, in this process (DOT's own cap is per process
    too). Taken without waiting: a request over the limit is answered at once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[str, int] = {}

    @contextlib.contextmanager
    def slot(self, address: str, limit: int) -> Iterator[bool]:
        with self._lock:
            taken = self._counts.get(address, 0) < limit
            if taken:
                self._counts[address] = self._counts.get(address, 0) + 1
        try:
            yield taken
        finally:
            if taken:
                with self._lock:
                    left = self._counts[address] - 1
                    if left:
                        self._counts[address] = left
                    else:
                        del self._counts[address]


IN_FLIGHT = _InFlight()


def names_a_metadata_document(request: HttpRequest) -> bool:
    """Whether this request names its client by a metadata document URL (which may be fetched
    while answering it): the authorize query, the consent form, the token or revoke body."""
    for source in (request.GET, request.POST if request.method == "POST" else {}):
        client_id = source.get("client_id") or ""
        if isinstance(client_id, str) and cimd.is_cimd_client_id(client_id):
            return True
    return False


@contextlib.contextmanager
def document_slot(request: HttpRequest) -> Iterator[bool]:
    """Held while answering a request that may fetch a metadata document: False when this
    address already has OAUTH_CIMD_FETCHES_PER_ADDRESS such requests under way. Held at the
    view, not in the fetcher: a refusal there would count as the document failing, and DOT then
    backs that URL off for every client (an attacker could silence someone else's client)."""
    if not names_a_metadata_document(request):
        yield True
        return
    with IN_FLIGHT.slot(client_address(request), settings.OAUTH_CIMD_FETCHES_PER_ADDRESS) as taken:
        yield taken


def _address_check(address: safety.IPAddress, port: int) -> str | None:
    # Tests serve metadata documents from this machine; a deployment never does.
    if settings.OAUTH_CIMD_ALLOW_LOOPBACK and address.is_loopback:
        return None
    return safety.default_check(address, port)


def _ssl_context() -> ssl.SSLContext:
    context = httpx.create_ssl_context(trust_env=False)
    if settings.OAUTH_CIMD_CA_FILE:
        context.load_verify_locations(cafile=settings.OAUTH_CIMD_CA_FILE)
    return context


class MetadataFetcher:
    """DOT's CIMD_METADATA_FETCHER: fetches a client's metadata document through the same checks
    as the web fetch tool (toolsets/web/safety.py: every address public, decimal and mapped forms
    normalised, the connection pinned to the checked address), no redirects, a size cap, one
    deadline for all of it; then checks the document's redirect URIs. DOT validates the rest,
    caches it on the Application (by Cache-Control, within its bounds) and backs off after a
    failure."""

    def fetch(self, client_id: str) -> tuple[dict[str, Any], int]:
        cimd._validate_client_id_url(client_id)  # https, a path, no fragment or credentials
        document, max_age = async_to_sync(self._fetch_by_deadline)(client_id)
        uris = document.get("redirect_uris")
        for uri in uris if isinstance(uris, list) else []:
            problem = redirect_uri_problem(uri) if isinstance(uri, str) else "a redirect URI is not a string"
            if problem:
                raise cimd.CIMDError(problem)
        return document, max_age

    async def _fetch_by_deadline(self, client_id: str) -> tuple[dict[str, Any], int]:
        # httpx's timeouts are per operation (each read may take its whole timeout): only one
        # deadline over the lookup, the connection and every read bounds a slow drip.
        seconds = settings.OAUTH_CIMD_FETCH_SECONDS
        try:
            async with asyncio.timeout(seconds):
                return await self._fetch(client_id)
        except TimeoutError:
            raise cimd.CIMDError(f"the document was not fetched within {seconds:g} s") from None

    async def _fetch(self, client_id: str) -> tuple[dict[str, Any], int]:
        try:
            destination = await safety.check_destination(client_id, check=_address_check)
        except ToolFailure as exc:
            raise cimd.CIMDError(str(exc)) from None
        transport = safety.PinnedTransport(destination, ssl_context=_ssl_context())
        seconds = settings.OAUTH_CIMD_FETCH_SECONDS
        try:
            async with (
                httpx.AsyncClient(
                    transport=transport, timeout=seconds, follow_redirects=False, trust_env=False
                ) as client,
                client.stream("GET", destination.url, headers={"Accept": "application/json"}) as response,
            ):
                if response.status_code != 200:
                    raise cimd.CIMDError(f"the document answered HTTP {response.status_code}")
                media_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
                if media_type != "application/json" and not media_type.endswith("+json"):
                    raise cimd.CIMDError(f"the document is not JSON ({media_type or 'no content type'})")
                body = b""
                async for chunk in response.aiter_bytes():
                    body += chunk
                    if len(body) > DOCUMENT_MAX_BYTES:
                        raise cimd.CIMDError("the document is larger than 16 KiB")
                cache_control = response.headers.get("cache-control", "")
        except httpx.HTTPError as exc:
            raise cimd.CIMDError(f"the document could not be fetched: {exc or type(exc).__name__}") from None
        try:
            document = json.loads(body)
        except ValueError:
            raise cimd.CIMDError("the document is not valid JSON") from None
        if not isinstance(document, dict):
            raise cimd.CIMDError("the document is not a JSON object")
        return document, cimd._effective_max_age(cache_control)
