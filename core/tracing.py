"""OpenTelemetry traces: one trace per turn, from the request that sent the message, through the
Celery task (its context travels in the task's headers), the turn in the worker, each model call
(a GenAI span), each tool call (`execute_tool`), subagents nested under the call that delegated
to them, and MCP requests (the `mcp` SDK opens a client span and writes `traceparent` into the
request's `_meta`, where the server picks it up).

Off unless an OTLP endpoint is configured: the standard `OTEL_EXPORTER_OTLP_ENDPOINT` (or
`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) or Tessera's own `TESSERA_OTLP_ENDPOINT`. Off, nothing is
set up: the API's no-op tracer answers every call, so the instrumented code costs a few
attribute lookups and exports nothing. The official SDK does the rest (batching, the OTLP/HTTP
exporter, the standard `OTEL_*` variables for headers, timeouts, sampling and resource
attributes)."""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Iterator, Mapping
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

log = logging.getLogger(__name__)

TRACER_NAME = "tessera"
_lock = threading.Lock()
_provider: Any = None


def endpoint() -> str:
    """Where spans go: Tessera's own setting, else the SDK's standard variables ('' when off)."""
    own = os.environ.get("TESSERA_OTLP_ENDPOINT", "").strip()
    if own:
        return own
    for name in ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"):
        value = os.environ.get(name, "").strip()
        if value:
            return value
    return ""


def configured() -> bool:
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    if os.environ.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "none":
        return False
    return bool(endpoint())


def enabled() -> bool:
    """Whether this process exports spans (set up and configured)."""
    return _provider is not None


def setup(role: str) -> bool:
    """Sets up the process's tracer provider once (web: at start; worker: when ready). `role`
    names the process kind in the resource (`tessera.process`), so a trace shows which web
    process and which worker each part ran in."""
    global _provider
    if not configured():
        return False
    with _lock:
        if _provider is not None:
            return True
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        resource = Resource.create(
            {
                # OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES, when set, win (Resource.create).
                "service.name": os.environ.get("OTEL_SERVICE_NAME") or "tessera",
                "tessera.process": role,
                "process.pid": os.getpid(),
            }
        )
        provider = TracerProvider(resource=resource)
        own = os.environ.get("TESSERA_OTLP_ENDPOINT", "").strip()
        # The exporter reads the standard variables itself (and appends /v1/traces to the
        # general endpoint); Tessera's own setting is a base URL in the same sense.
        exporter = OTLPSpanExporter(endpoint=own.rstrip("/") + "/v1/traces") if own else OTLPSpanExporter()
        provider.add_span_processor(BatchSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
        _provider = provider
    log.info("Traces are exported to %s", endpoint())
    return True


def shutdown() -> None:
    """Exports what is still batched (a process that ends must not lose its last turn's spans)."""
    global _provider
    with _lock:
        provider, _provider = _provider, None
    if provider is not None:
        try:
            provider.shutdown()
        except Exception:  # a collector gone at shutdown is not worth a traceback
            log.warning("Exporting the last spans failed", exc_info=True)


def tracer() -> trace.Tracer:
    return trace.get_tracer(TRACER_NAME)


def task_headers() -> dict[str, str]:
    """The current trace context as Celery task headers (W3C `traceparent`/`tracestate`)."""
    carrier: dict[str, str] = {}
    if enabled():
        propagate.inject(carrier)
    return carrier


def carrier_from(request: Any) -> dict[str, str]:
    """The trace context a Celery task was sent with: Celery puts a message's custom headers
    on the request (as attributes, and in `headers` for some transports and protocols)."""
    found: dict[str, str] = {}
    headers = getattr(request, "headers", None)
    for name in ("traceparent", "tracestate"):
        value = getattr(request, name, None)
        if value is None and isinstance(headers, Mapping):
            value = headers.get(name)
        if isinstance(value, str) and value:
            found[name] = value
    return found


@contextlib.contextmanager
def continued(carrier: Mapping[str, str] | None) -> Iterator[None]:
    """Makes the context in `carrier` the current one for the block (a turn continues the trace
    of the request that started it)."""
    if not carrier or not enabled():
        yield
        return
    token = otel_context.attach(propagate.extract(dict(carrier)))
    try:
        yield
    finally:
        otel_context.detach(token)


def trace_id(span: Span | None = None) -> str:
    """The current (or `span`'s) trace id as 32 hex digits; '' when nothing is traced."""
    found = (span or trace.get_current_span()).get_span_context()
    return format(found.trace_id, "032x") if found.is_valid else ""


def failed(span: Span, description: str) -> None:
    span.set_status(Status(StatusCode.ERROR, description[:200]))


def trace_link(value: str) -> str:
    """The admin's link to a trace in their tracing UI (TESSERA_TRACE_URL, with `{trace_id}`)."""
    from django.conf import settings

    template = str(getattr(settings, "TRACE_URL", "") or "")
    if not value or "{trace_id}" not in template:
        return ""
    return template.replace("{trace_id}", value)


class RequestSpanMiddleware:
    """A server span per request, named by its route (`POST chats/<int:chat_id>/send/`), so a
    turn's trace starts where the user clicked. Sync and async alike; nothing when off."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Any) -> None:
        from asgiref.sync import iscoroutinefunction, markcoroutinefunction

        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request: Any) -> Any:
        if self.is_async:
            return self._acall(request)
        if not enabled():
            return self.get_response(request)
        with self._span(request) as span:
            response = self.get_response(request)
            self._finish(span, request, response)
            return response

    async def _acall(self, request: Any) -> Any:
        if not enabled():
            return await self.get_response(request)
        with self._span(request) as span:
            response = await self.get_response(request)
            self._finish(span, request, response)
            return response

    def _span(self, request: Any) -> Any:
        # Not from the caller's headers: a browser's traceparent is not to be trusted, and a
        # proxy's own trace is linked by the operator's tooling, not by Tessera.
        return tracer().start_as_current_span(
            request.method,
            kind=SpanKind.SERVER,
            attributes={"http.request.method": request.method, "url.path": request.path[:200]},
        )

    @staticmethod
    def _finish(span: Span, request: Any, response: Any) -> None:
        match = getattr(request, "resolver_match", None)
        route = getattr(match, "route", "") if match is not None else ""
        if route:
            span.update_name(f"{request.method} {route}")
            span.set_attribute("http.route", route)
        status = getattr(response, "status_code", 0)
        span.set_attribute("http.response.status_code", status)
        if status >= 500:
            failed(span, f"HTTP {status}")
