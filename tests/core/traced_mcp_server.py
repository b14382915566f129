"""The echo MCP server (tests/toolsets/mcp/echo_server.py) with OpenTelemetry's SDK set up, as
a server operator would: its spans go to OTEL_EXPORTER_OTLP_ENDPOINT, each at once (a stdio
server is stopped, not shut down, when its client goes). The SDK's server opens a span per
request, continuing the trace context the client put in the request's `_meta`. Imports nothing
from Tessera."""

from __future__ import annotations

import sys
from pathlib import Path

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

provider = TracerProvider(resource=Resource.create({"service.name": "echo-mcp-server"}))
provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter()))
trace.set_tracer_provider(provider)

sys.path.insert(0, str(Path(__file__).parents[1] / "toolsets" / "mcp"))
from echo_server import server  # noqa: E402

if __name__ == "__main__":
    server.run("stdio")
