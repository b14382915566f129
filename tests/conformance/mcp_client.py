"""Tessera's MCP client as the official conformance suite's client under test.

`conformance client --scenario NAME --command "python -m tests.conformance.mcp_client"` starts a
test server, runs this with the server's URL as the last argument and the scenario's name in
MCP_CONFORMANCE_SCENARIO (and, for some, data in MCP_CONFORMANCE_CONTEXT), then judges what
reached the server. Everything protocol-side here is Tessera's own code, the code the worker
runs: the server is an `MCPServer` row, its connection `toolsets.mcp.connection.Connection`
(discovery, listing, calls, healing), and OAuth is `toolsets.mcp.oauth` (Connect's `start`, the
callback's `finish`, the worker's provider). What this file plays is the people around it:

- the admin, who adds the server (OAuth when the scenario is an auth one; pre-registered client
  credentials when the scenario hands some over);
- the user, who presses Connect and consents: the suite's authorization server approves at
  once, so "consent" is following the authorization URL to the redirect and handing the
  callback's query to `finish`, as the browser would; and who, when a call asks for more
  access, connects again;
- the model, which calls every tool the server lists with arguments made from its schema.

Each run has a database of its own, copied from the migrated template the runner made
(TESSERA_CONFORMANCE_TEMPLATE), so scenarios never share state.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

ROOT = Path(__file__).resolve().parents[2]
# Where Tessera runs, as Connect builds its callback from the request: https, so Tessera offers
# its Client ID Metadata Document (https://<host>/client-metadata.json) to servers that support
# them; the host is the one the suite's CIMD scenario expects the document on.
CALLBACK = "https://conformance-test.local/toolsets/mcp/callback/"
# How often the "user" connects again when calls keep asking for more access.
MAX_CONNECTS = 3


def _django(workdir: Path) -> None:
    template = os.environ.get("TESSERA_CONFORMANCE_TEMPLATE")
    if not template:
        sys.exit("TESSERA_CONFORMANCE_TEMPLATE is not set: run the scenarios with python -m tests.conformance.run")
    shutil.copyfile(template, workdir / "tessera.sqlite3")
    os.environ["TESSERA_VAR_DIR"] = str(workdir)
    os.environ.pop("DATABASE_URL", None)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()


def example(schema: dict[str, Any]) -> Any:
    """A value the schema accepts (what a model would make up): its default or first example or
    enum member, else the simplest value of its type."""
    for key in ("default", "const"):
        if key in schema:
            return schema[key]
    if schema.get("examples"):
        return schema["examples"][0]
    if schema.get("enum"):
        return schema["enum"][0]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if kind == "object" or "properties" in schema:
        properties = schema.get("properties") or {}
        return {name: example(sub) for name, sub in properties.items() if name in (schema.get("required") or [])}
    if kind == "array":
        return []
    if kind in ("integer", "number"):
        return max(1, schema.get("minimum", 1))
    if kind == "boolean":
        return True
    return "example"


def _server_row(url: str, scenario: str, context: dict[str, Any]) -> tuple[Any, Any]:
    from django.contrib.auth import get_user_model

    from toolsets.mcp.models import MCPServer

    user = get_user_model().objects.create_user("conformance", password=None)
    server = MCPServer.objects.create(
        name="Conformance",
        slug="conformance",
        transport=MCPServer.Transport.HTTP,
        url=url,
        credential=MCPServer.Credential.OAUTH if scenario.startswith("auth/") else MCPServer.Credential.NONE,
        **_client_credentials(context),
    )
    return server, user


def _client_credentials(context: dict[str, Any]) -> dict[str, Any]:
    # The admin's pre-registered client, when the scenario's authorization server has one.
    if context.get("client_id"):
        return {"oauth_client_id": context["client_id"], "oauth_client_secret": context.get("client_secret") or ""}
    return {}


async def connect_user(spec: Any, user_id: int) -> None:
    """The user's Connect: `oauth.start` as the Connect view runs it, the browser's trip to the
    authorization server (which approves at once) and `oauth.finish` as the callback runs it."""
    import httpx2

    from toolsets.mcp import oauth

    started = await oauth.start(spec, user_id, CALLBACK)
    if started is None:
        return
    url, pending = started
    async with httpx2.AsyncClient(follow_redirects=False, timeout=30) as browser:
        response = await browser.get(url)
    location = response.headers.get("location", "")
    if response.status_code not in (301, 302, 303, 307) or not location:
        raise RuntimeError(f"the authorization server answered {response.status_code}, not a redirect")
    query = {key: values[0] for key, values in parse_qs(urlsplit(location).query).items()}
    if query.get("state") != pending.state:
        raise RuntimeError("the redirect carries another state")
    await oauth.finish(spec, user_id, pending.as_dict(), query.get("code", ""), query.get("iss"))


async def run(url: str, scenario: str, context: dict[str, Any]) -> None:
    from asgiref.sync import sync_to_async

    from toolsets.base import ToolFailure
    from toolsets.mcp.catalog import ServerSpec
    from toolsets.mcp.client import access_for
    from toolsets.mcp.connection import Connection, list_all_tools

    server, user = await sync_to_async(_server_row)(url, scenario, context)
    spec = ServerSpec.of(server)
    connects = 0
    if spec.credential == "oauth":
        await connect_user(spec, user.pk)
        connects += 1
    while True:
        connection = Connection(spec, access_for(spec, user.pk, ""))
        try:
            client = await connection.ready(30)
            tools = await list_all_tools(client)
            for tool in tools:
                arguments = example(tool.get("inputSchema") or {})
                result = await connection.call(tool["name"], arguments, None, spec.timeout_s)
                print(f"{tool['name']}: {json.dumps(result)[:300]}")
            return
        except ToolFailure as exc:
            # When Tessera asks the user to connect again (a grant that expired, a call that needs
            # more scope), the user does, a few times at most.
            if "connect again" not in str(exc) or connects >= MAX_CONNECTS:
                raise
            print(f"connecting again: {exc}")
            await connect_user(spec, user.pk)
            connects += 1
        finally:
            await connection.close()


def main() -> None:
    url = sys.argv[-1]
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    with tempfile.TemporaryDirectory(prefix="tessera-conformance-") as workdir:
        _django(Path(workdir))
        asyncio.run(run(url, scenario, context))


if __name__ == "__main__":
    main()
