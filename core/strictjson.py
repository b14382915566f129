"""Parsing JSON that strangers send (socket frames, API bodies) without letting them crash the
parser: a size cap, a nesting cap checked before parsing (the standard parser recurses, so
100 000 `[` raise RecursionError), and numbers that stay finite (`1e400`, `Infinity`, `NaN`)."""

from __future__ import annotations

import json
import math
import re
from typing import Any

MAX_DEPTH = 64
_STRUCTURE = re.compile(rb'[\[\]{}"\\]')
# A \uD800-\uDFFF escape may stand alone (a lone surrogate): valid JSON, but no database or
# socket can encode it, so it is refused here rather than failing later.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


class InvalidJSON(ValueError):
    """The text is not JSON this application accepts; the message says why, for the sender."""


def _depth_exceeds(data: bytes, limit: int) -> bool:
    depth = 0
    in_string = False
    skip = -1  # position of a character escaped by a backslash inside a string
    for match in _STRUCTURE.finditer(data):
        position = match.start()
        if position == skip:
            continue
        char = data[position]
        if in_string:
            if char == 0x5C:  # backslash: the next character is escaped
                skip = position + 1
            elif char == 0x22:
                in_string = False
        elif char == 0x22:
            in_string = True
        elif char in (0x5B, 0x7B):
            depth += 1
            if depth > limit:
                return True
        elif char in (0x5D, 0x7D):
            depth -= 1
    return False


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise InvalidJSON("numbers must be finite")
    return value


def _constant(name: str) -> Any:
    raise InvalidJSON(f"{name} is not a JSON number")


def loads(data: str | bytes, *, max_bytes: int, max_depth: int = MAX_DEPTH) -> Any:
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else bytes(data)
    if len(raw) > max_bytes:
        raise InvalidJSON(f"too large (at most {max_bytes} bytes)")
    if _depth_exceeds(raw, max_depth):
        raise InvalidJSON(f"nested too deeply (at most {max_depth} levels)")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidJSON("not UTF-8") from None
    try:
        value = json.loads(text, parse_float=_finite, parse_constant=_constant)
    except InvalidJSON:
        raise
    except (ValueError, RecursionError) as exc:  # ValueError covers JSONDecodeError and huge ints
        raise InvalidJSON(f"not valid JSON ({str(exc).split(':')[0]})") from None
    if _SURROGATE_ESCAPE.search(raw):
        try:
            json.dumps(value, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidJSON("strings must be valid Unicode (a lone surrogate escape)") from None
    return value
