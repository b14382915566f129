"""One redaction function for every error text that leaves a process's memory.

Providers and tools sometimes echo a credential back in an error ("Invalid request for api key
sk-…"). Whatever reaches a page, the database, Redis or a log goes through `redact()` first.

It knows the secrets this process has actually held in plaintext: every stored secret registers
itself when it is decrypted (`core.crypto`), anything else that handles a credential (request
headers, tokens) calls `register()`, and credentials from the environment are registered at
import. A secret the process never held cannot be in its output, so the set is complete where it
matters, and redaction costs a few substring searches instead of a database query.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from typing import Any
from urllib.parse import quote, urlsplit

REDACTED = "[redacted]"
# Shorter values would match ordinary words; no real credential is this short.
MIN_SECRET_LENGTH = 8
# Environment variables that hold credentials by their names' convention.
_SECRET_ENV = re.compile(
    r"(?:^|_)(?:API_?KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?|ACCESS_KEY(?:_ID)?)(?:$|_)|_KEY$", re.IGNORECASE
)
_URL_ENV = re.compile(r"_URL$")
# Shapes that are credentials whoever owns them (bearer headers, well-known key prefixes): caught
# even when the process never registered the value.
_PATTERNS = re.compile(
    r"(?i)(?<![A-Za-z0-9])(?:bearer\s+)[A-Za-z0-9._~+/=-]{12,}"
    r"|(?<![A-Za-z0-9_-])(?:sk|rk|pk|tsk|gsk|xai|sk-ant|sk-proj)[-_][A-Za-z0-9_-]{16,}"
    r"|(?<![A-Za-z0-9])AIza[0-9A-Za-z_-]{30,}"
)

_lock = threading.Lock()
_secrets: set[str] = set()
_pattern: re.Pattern[str] | None = None


def register(*values: str | None) -> None:
    """Adds credentials (and their URL-encoded forms) to the set every redaction removes."""
    global _pattern
    added = False
    with _lock:
        for value in values:
            if not value or len(value) < MIN_SECRET_LENGTH:
                continue
            for form in {value, quote(value, safe=""), value.strip()}:
                if len(form) >= MIN_SECRET_LENGTH and form not in _secrets:
                    _secrets.add(form)
                    added = True
        if added:
            _pattern = None


def _compiled() -> re.Pattern[str] | None:
    global _pattern
    with _lock:
        if _pattern is None and _secrets:
            _pattern = re.compile(_trie(_secrets))
        return _pattern


def _trie(values: set[str]) -> str:
    """One pattern for many literals, as a prefix tree: at each position the regex engine follows
    one branch instead of trying every secret in turn (a deployment holds hundreds of them, and
    tool results are redacted too: 2 000 secrets over 100 kB take ~15 ms this way, ~1 s as a
    flat alternation). Optional tails are greedy, so a secret that contains another is removed
    whole."""
    root: dict[str, Any] = {}
    for value in values:
        node = root
        for char in value:
            node = node.setdefault(char, {})
        node[""] = {}

    def build(node: dict[str, Any]) -> str:
        branches = []
        for char, child in sorted(node.items()):
            if not char:
                continue
            # A run of single children is one literal: nesting stays as deep as the branching.
            run = char
            while len(child) == 1 and "" not in child:
                ((char, child),) = child.items()
                run += char
            branches.append(re.escape(run) + build(child))
        if not branches:
            return ""
        body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
        return f"(?:{body})?" if "" in node else body

    return build(root)


def redact(text: Any) -> str:
    """`text` as a string with every known secret and every credential-shaped token replaced."""
    if text is None:
        return ""
    text = text if isinstance(text, str) else str(text)
    if not text:
        return text
    return _PATTERNS.sub(REDACTED, _redact_known(text))


def _redact_known(text: str) -> str:
    pattern = _compiled()
    return pattern.sub(REDACTED, text) if pattern is not None else text


# Binary content in JSON (an MCP image's `data`, a resource's `blob`) is base64: a credential's
# *shape* turns up in a megabyte of it by chance (one pattern in ~50 images), so only the values
# this process knows are removed from it, never a shape.
_BINARY_KEYS = frozenset({"data", "blob"})
_BASE64 = re.compile(r"[A-Za-z0-9+/=\s]{64,}")


def redact_data(value: Any) -> Any:
    """`redact` applied to every string inside JSON-like data (dicts, lists): keys and values."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {
            redact(key) if isinstance(key, str) else key: (
                _redact_known(item)
                if key in _BINARY_KEYS and isinstance(item, str) and _BASE64.fullmatch(item)
                else redact_data(item)
            )
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [redact_data(item) for item in value]
    return value


def register_environment(environ: Any = None) -> None:
    """Credentials the process was started with: provider keys LiteLLM reads, the secret key,
    passwords inside database and Redis URLs."""
    environ = os.environ if environ is None else environ
    for name, value in environ.items():
        if _SECRET_ENV.search(name):
            register(value)
        elif _URL_ENV.search(name) and "@" in value:
            try:
                parts = urlsplit(value)
            except ValueError:
                continue
            register(parts.password)


class RedactingFilter(logging.Filter):
    """Logging filter: the formatted message and any traceback text are redacted before a
    handler writes them."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a broken format string must still be logged, not lost
            message = str(record.msg)
        record.msg, record.args = redact(message), None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        return True


register_environment()
