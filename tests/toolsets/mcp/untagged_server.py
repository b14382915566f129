"""A 2026-07-28 MCP server over stdio, written by hand the way a small server may be, whose
results never carry `resultType`: the revision says a client then assumes "complete". One tool,
`shout`. Imports nothing from Tessera nor the SDK."""

from __future__ import annotations

import json
import sys
from typing import Any

VERSION = "2026-07-28"
SHOUT = {
    "name": "shout",
    "description": "The text in capitals.",
    "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
}


def result(method: str, params: dict[str, Any]) -> dict[str, Any] | None:
    # The cache hints the revision requires on these results are there; `resultType` is not.
    if method == "server/discover":
        return {
            "supportedVersions": [VERSION],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "untagged", "version": "1.0"},
            "ttlMs": 0,
            "cacheScope": "private",
        }
    if method == "tools/list":
        return {"tools": [SHOUT], "ttlMs": 0, "cacheScope": "private"}
    if method == "tools/call" and params.get("name") == "shout":
        text = str((params.get("arguments") or {}).get("text", ""))
        return {"content": [{"type": "text", "text": text.upper()}]}
    return None


def main() -> None:
    for line in sys.stdin:
        message = json.loads(line)
        if "id" not in message or "method" not in message:
            continue  # notifications, and answers to requests this server never sends
        answer = result(message["method"], message.get("params") or {})
        reply: dict[str, Any] = {"jsonrpc": "2.0", "id": message["id"]}
        if answer is None:
            reply["error"] = {"code": -32601, "message": "Method not found"}
        else:
            reply["result"] = answer
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
