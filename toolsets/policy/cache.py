"""The result cache: an identical call within a tool's declared cache time gets the stored
result without running the tool.

Identical means the same tool, the same arguments (canonical JSON: key order and spacing do
not matter, `1` and `1.0` do), the same user — unless the tool declares its results public —
and the same credential (a hash of the key the call would use, so results fetched with one
account never reach a call made with another). Only successful results of tools without side
effects are stored; an admin can switch caching off per tool (`ToolRule.cache_enabled`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

PREFIX = "tessera:policy:cache"


def canonical(arguments: Any) -> str:
    return json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def credential_scope(api_key: str) -> str:
    return hashlib.sha256(api_key.encode()).hexdigest()[:24] if api_key else "-"


def key(qualified_name: str, arguments: dict[str, Any], *, user_id: int | None, api_key: str, public: bool) -> str:
    who = "public" if public else f"user:{user_id}"
    material = canonical([qualified_name, who, credential_scope(api_key), arguments])
    return f"{PREFIX}:{hashlib.sha256(material.encode()).hexdigest()}"


def cacheable(tool: Any, *, enabled: bool = True) -> bool:
    return bool(enabled and tool.cache_ttl_s > 0 and not tool.side_effects)


@dataclass(frozen=True)
class Hit:
    result: Any
    at: datetime  # when the call that produced it ran
    execution_id: int | None


def get(redis: Any, cache_key: str) -> Hit | None:
    raw = redis.get(cache_key)
    if not raw:
        return None
    try:
        data = json.loads(raw)
        return Hit(data["result"], datetime.fromisoformat(data["at"]), data.get("execution_id"))
    except (ValueError, KeyError, TypeError):
        return None  # an entry this version cannot read is a miss, never an error


def put(
    redis: Any, cache_key: str, result: Any, *, ttl_s: int, execution_id: int | None, at: datetime | None = None
) -> None:
    when = (at or datetime.now(UTC)).isoformat()
    payload = json.dumps({"result": result, "at": when, "execution_id": execution_id}, default=str)
    redis.set(cache_key, payload, ex=max(1, int(ttl_s)))
