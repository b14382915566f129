"""What an MCP server lists, made safe to keep: its text printable and capped, and its tools
bounded in number, each with a usable name and a valid, self-contained input schema of an object
(one a validator can check promptly)."""

from __future__ import annotations

import json
import unicodedata
from typing import Any

import jsonschema

from core import bounded_schema

MAX_TOOLS = 200
MAX_DESCRIPTION = 1000
MAX_TITLE = 80
MAX_SCHEMA_BYTES = 20_000
MAX_UI_URI = 500


def clean_text(value: Any, limit: int) -> str:
    """Untrusted text from a server: printable characters (and newlines) only, capped."""
    if not isinstance(value, str):
        return ""
    text = "".join(ch for ch in value if ch in "\n\t" or unicodedata.category(ch)[0] != "C")
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def clean_tools(listed: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """The tools worth keeping from a `tools/list` answer (dumped to JSON), and a note for each
    one left out."""
    kept: list[dict[str, Any]] = []
    skipped: list[str] = []
    seen: set[str] = set()
    for item in listed:
        name = item.get("name") if isinstance(item, dict) else None
        if not isinstance(name, str) or not name or len(name) > 128 or not name.isprintable():
            skipped.append(f"{str(name)[:60]!r}: not a usable name")
            continue
        if name in seen:
            skipped.append(f"{name}: listed twice")
            continue
        if len(kept) >= MAX_TOOLS:
            skipped.append(f"{name}: more than {MAX_TOOLS} tools")
            continue
        execution = item.get("execution")
        if isinstance(execution, dict) and execution.get("taskSupport") == "required":
            # Tessera does not run tasks (2025-11-25's task-augmented calls): a plain call of
            # such a tool would only be refused.
            skipped.append(f"{name}: it runs only as a task, which Tessera does not support")
            continue
        problem = schema_problem(item.get("inputSchema"))
        if problem:
            skipped.append(f"{name}: {problem}")
            continue
        seen.add(name)
        annotations: dict[str, Any] = item["annotations"] if isinstance(item.get("annotations"), dict) else {}
        kept.append(
            {
                "name": name,
                "title": clean_text(item.get("title") or annotations.get("title"), MAX_TITLE),
                "description": clean_text(item.get("description"), MAX_DESCRIPTION),
                "inputSchema": item["inputSchema"],
                "annotations": {
                    k: annotations[k]
                    for k in ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")
                    if isinstance(annotations.get(k), bool)
                },
            }
        )
        ui = ui_meta(item.get("_meta"))
        if ui:
            kept[-1]["ui"] = ui
    return kept, skipped


def ui_meta(meta: Any) -> dict[str, Any]:
    """A tool's MCP Apps metadata (`_meta.ui`, extension io.modelcontextprotocol/ui): the
    `ui://` resource its results are shown in and who may call it ("model", "app"). The flat
    `_meta["ui/resourceUri"]` is the spec's deprecated spelling of the same."""
    if not isinstance(meta, dict):
        return {}
    found_ui = meta.get("ui")
    ui: dict[str, Any] = found_ui if isinstance(found_ui, dict) else {}
    found: dict[str, Any] = {}
    uri = ui.get("resourceUri") or meta.get("ui/resourceUri")
    if isinstance(uri, str) and uri.startswith("ui://") and len(uri) <= MAX_UI_URI and uri.isprintable():
        found["resourceUri"] = uri
    visibility = ui.get("visibility")
    if isinstance(visibility, list) and visibility and all(v in ("model", "app") for v in visibility):
        found["visibility"] = sorted(set(visibility), reverse=True)  # "model" before "app"
    return found


def schema_problem(schema: Any) -> str:
    if not isinstance(schema, dict) or schema.get("type") != "object":
        return "its input schema is not an object schema"
    if len(json.dumps(schema, default=str)) > MAX_SCHEMA_BYTES:
        return f"its input schema is larger than {MAX_SCHEMA_BYTES // 1000} kB"
    if _remote_ref(schema):
        return "its input schema refers to other documents"
    patterns = bounded_schema.schema_problems(schema)
    if patterns:
        return f"its input schema cannot be checked ({patterns})"
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
        # Compiling once surfaces patterns and references the validator cannot use.
        list(jsonschema.Draft202012Validator(schema).iter_errors({}))
    except Exception as exc:  # any failure here would otherwise happen on every call
        return f"its input schema is invalid ({str(exc).splitlines()[0][:120]})"
    return ""


def _remote_ref(value: Any) -> bool:
    if isinstance(value, dict):
        for key, item in value.items():
            if key in ("$ref", "$dynamicRef", "$recursiveRef") and not (isinstance(item, str) and item.startswith("#")):
                return True
            if _remote_ref(item):
                return True
    elif isinstance(value, list):
        return any(_remote_ref(item) for item in value)
    return False
