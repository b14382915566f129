"""Hostile requests to the two APIs other programs speak, on the real stack (Daphne, the SDK's
transport): the OpenAI-compatible API at /v1 and the MCP server at /mcp. Whatever arrives —
bodies that are not JSON, wrong types in every field, huge and deeply nested bodies, bad
headers, wrong methods — the answer is a clear 4xx in the shape the caller's library reads
(OpenAI's error object, a JSON-RPC error), never a 500, and nothing in the web log's tracebacks.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from chat.models import AppSettings
from hub.models import ApiToken

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

HOSTILE = [
    None,
    0,
    -1,
    1e308,
    True,
    "",
    "\x00",
    "a\x00b",
    "\ud800",
    "x" * 200_000,
    [],
    [1, "two", None],
    {},
    {"$ref": "#"},
    "<script>alert(1)</script>",
    "../../etc/passwd",
]


def _deep(levels: int) -> str:
    return "[" * levels + "]" * levels


RAW_BODIES: list[tuple[bytes, str]] = [
    (b"", "application/json"),
    (b"not json", "application/json"),
    (b"\xff\xfe\xfd", "application/json"),
    (b"{" * 5000, "application/json"),
    (_deep(100_000).encode(), "application/json"),
    (b'{"a": NaN}', "application/json"),
    (b'{"a": 1e99999}', "application/json"),
    (b"null", "application/json"),
    (b"[]", "application/json"),
    (b"42", "application/json"),
    (b'"text"', "application/json"),
    (b'{"model": "x"}', "text/plain"),
    (b"model=x", "application/x-www-form-urlencoded"),
    (b'{"a": "\\ud800"}', "application/json"),
    (b'{"a": 1, "a": 2}', "application/json"),
]


@pytest.fixture
def apis_on(db: Any) -> None:
    settings = AppSettings.load()
    settings.openai_api = True
    settings.mcp_server = True
    settings.save()


@pytest.fixture
def token(user: Any) -> str:
    return ApiToken.issue(user, "fuzz")[1]


def _tracebacks(stack: Any) -> int:
    log = Path(stack.logs) / "web.log"
    return log.read_text(errors="replace").count("Traceback") if log.exists() else 0


def _openai_error(response: httpx.Response) -> None:
    assert 400 <= response.status_code < 500, (response.status_code, response.text[:300])
    body = response.json()
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    assert isinstance(body["error"]["type"], str)


def _jsonrpc_error(response: httpx.Response) -> None:
    assert 400 <= response.status_code < 500, (response.status_code, response.text[:300])
    body = response.json()
    assert body["jsonrpc"] == "2.0" and "id" in body
    assert isinstance(body["error"]["code"], int) and isinstance(body["error"]["message"], str)


def _completion_bodies() -> list[Any]:
    valid: dict[str, Any] = {"model": "no-such-model", "messages": [{"role": "user", "content": "hi"}]}
    bodies: list[Any] = []
    for field in ("model", "messages", "stream", "tools", "tool_choice", "tessera", "stream_options", "temperature"):
        for value in HOSTILE:
            bodies.append({**valid, field: value})
    for value in HOSTILE:
        bodies.append({**valid, "messages": [{"role": "user", "content": value}]})
        bodies.append({**valid, "messages": [{"role": value, "content": "hi"}]})
        bodies.append({**valid, "messages": [value]})
        bodies.append({**valid, "tools": [{"type": "function", "function": {"name": value, "parameters": value}}]})
    return bodies


def test_v1_answers_hostile_requests_in_openais_error_shape(stack: Any, apis_on: None, token: str) -> None:
    before = _tracebacks(stack)
    auth = {"Authorization": f"Bearer {token}"}
    url = f"{stack.url}/v1/chat/completions"
    with httpx.Client(timeout=60) as http:
        for body in _completion_bodies():
            _openai_error(
                http.post(url, content=json.dumps(body), headers={**auth, "Content-Type": "application/json"})
            )
        for raw, content_type in RAW_BODIES:
            _openai_error(http.post(url, content=raw, headers={**auth, "Content-Type": content_type}))
        # A body over the site's limit is refused before it is read, in the same shape.
        huge = http.post(url, content=b"[" * (11 * 1024 * 1024), headers={**auth, "Content-Type": "application/json"})
        assert huge.status_code == 413
        _openai_error(huge)
        # Wrong methods and paths.
        for method in ("GET", "PUT", "DELETE", "PATCH"):
            _openai_error(http.request(method, url, headers=auth))
        _openai_error(http.post(f"{stack.url}/v1/models", headers=auth))
        for path in ("/v1/nope", "/v1/", "/v1/chat/completions/extra", "/v1/completions", "/v1/embeddings"):
            _openai_error(http.post(f"{stack.url}{path}", json={}, headers=auth))
        # Still working afterwards.
        assert http.get(f"{stack.url}/v1/models", headers=auth).status_code == 200
        # Bad credentials, whatever their form (last: enough of them lock the address out, 429).
        headers_: list[Any] = [
            "",
            "Bearer",
            "Basic YTpi",
            "Bearer tsk_" + "x" * 5000,
            "Bearer \u00e9".encode("latin-1"),
        ]
        for header in headers_:
            _openai_error(http.post(url, json={"model": "tessera", "messages": []}, headers={"Authorization": header}))
    assert _tracebacks(stack) == before


MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def _mcp_bodies() -> list[Any]:
    bodies: list[Any] = [
        {},
        {"jsonrpc": "1.0", "id": 1, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 1},
        {"jsonrpc": "2.0", "method": "tools/list"},  # a notification that is no notification
        [{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}],  # batches are not part of the protocol
    ]
    for value in HOSTILE:
        bodies.append({"jsonrpc": "2.0", "id": 1, "method": value})
        bodies.append({"jsonrpc": "2.0", "id": value, "method": "tools/list"})
        bodies.append({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": value})
        bodies.append({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": value}})
        bodies.append({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "x", "arguments": value}})
        bodies.append({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": value})
    return bodies


def _mcp_refused(response: httpx.Response) -> None:
    """Refused at the HTTP level with a JSON-RPC error body, or answered by the protocol with a
    JSON-RPC error (HTTP 200, as the specification has it for a request it could read)."""
    assert response.status_code < 500, (response.status_code, response.text[:300])
    if response.status_code >= 400:
        _jsonrpc_error(response)
        return
    if response.status_code == 202 and not response.content:
        return  # a notification (no id): accepted and ignored, as the specification has it
    text = response.text
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        text = "\n".join(line[5:] for line in text.splitlines() if line.startswith("data:"))
    lines = text.strip().splitlines()
    assert lines, (response.status_code, response.headers.get("content-type"), "an empty answer")
    found = json.loads(lines[-1])
    assert found["jsonrpc"] == "2.0" and isinstance(found["error"]["code"], int), text[:300]


@pytest.mark.parametrize("version", ["2025-11-25", "2026-07-28", None])
def test_mcp_answers_hostile_requests_with_json_rpc_errors(
    stack: Any, apis_on: None, token: str, version: str | None
) -> None:
    before = _tracebacks(stack)
    headers = {**MCP_HEADERS, "Authorization": f"Bearer {token}"}
    if version:
        headers["MCP-Protocol-Version"] = version
    url = f"{stack.url}/mcp"
    with httpx.Client(timeout=60) as http:
        for body in _mcp_bodies():
            _mcp_refused(http.post(url, content=json.dumps(body), headers=headers))
        for raw, content_type in RAW_BODIES:
            _mcp_refused(http.post(url, content=raw, headers={**headers, "Content-Type": content_type}))
        huge = http.post(url, content=b"[" * (11 * 1024 * 1024), headers=headers)
        assert huge.status_code == 413
        _jsonrpc_error(huge)
    assert _tracebacks(stack) == before


def test_mcp_refuses_bad_headers_and_methods_with_json_rpc_errors(stack: Any, apis_on: None, token: str) -> None:
    before = _tracebacks(stack)
    auth = {"Authorization": f"Bearer {token}"}
    url = f"{stack.url}/mcp"
    listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    with httpx.Client(timeout=60) as http:
        odd: list[Any] = [
            {"Accept": "text/html"},
            {"Accept": ""},
            {"MCP-Protocol-Version": "1999-01-01"},
            {"MCP-Protocol-Version": "\u00e9".encode("latin-1")},
            {"Mcp-Session-Id": "no-such-session"},
            {"Mcp-Session-Id": "x" * 10_000},
            {"Content-Type": "text/plain"},
        ]
        for headers in odd:
            _mcp_refused(http.post(url, json=listing, headers={**MCP_HEADERS, **auth, **headers}))
        for method in ("PUT", "PATCH", "DELETE", "GET"):
            answer = http.request(method, url, headers={**MCP_HEADERS, **auth})
            assert 400 <= answer.status_code < 500, (method, answer.status_code)
        # Still working afterwards.
        fine = http.post(url, json=listing, headers={**MCP_HEADERS, **auth, "MCP-Protocol-Version": "2025-11-25"})
        assert fine.status_code in (200, 400)
        headers_: list[Any] = [
            "",
            "Bearer",
            "Basic YTpi",
            "Bearer tsk_" + "x" * 5000,
            "Bearer \u00e9".encode("latin-1"),
        ]
        for header in headers_:
            refused = http.post(url, json=listing, headers={**MCP_HEADERS, "Authorization": header})
            assert refused.status_code == 401
            _jsonrpc_error(refused)
    assert _tracebacks(stack) == before
