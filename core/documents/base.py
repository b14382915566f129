"""What reading a document gives (`Extracted`), how much it may read (`Limits`), and how it fails
(`ExtractError`, with a sentence for the person): shared by the text and document readers
(extract.py) and the image reader (images.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


class ExtractError(Exception):
    """The file cannot be read; the message says why, for the person."""


@dataclass
class Limits:
    max_pages: int = 2000
    max_chars: int = 20_000_000


@dataclass
class Extracted:
    kind: str
    text: str
    page_starts: list[int] = field(default_factory=lambda: [0])
    facts: dict[str, Any] = field(default_factory=dict)
    thumbnail: bytes | None = None


def reason(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text[:200]
