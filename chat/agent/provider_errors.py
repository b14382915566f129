"""How provider failures are told apart and described: which are worth another try, which no
retry will fix, the wait a provider asked for, and a message fit to show a person."""

from __future__ import annotations

import datetime
import email.utils
import math
from typing import Any

import litellm

# Errors worth another try: the provider is busy or briefly unreachable.
RETRYABLE_ERRORS: tuple[type[BaseException], ...] = (
    litellm.RateLimitError,
    litellm.InternalServerError,
    litellm.ServiceUnavailableError,
    litellm.BadGatewayError,
    litellm.APIConnectionError,
    litellm.Timeout,
)
# Errors no retry will fix: configuration or request problems.
ABORT_ERRORS: tuple[type[BaseException], ...] = (
    litellm.AuthenticationError,
    litellm.PermissionDeniedError,
    litellm.NotFoundError,
    litellm.BadRequestError,
    litellm.ContextWindowExceededError,
    litellm.ContentPolicyViolationError,
    litellm.UnsupportedParamsError,
    litellm.BudgetExceededError,
)


def describe_error(exc: BaseException) -> tuple[str, str]:
    """A (kind, message) pair fit to show a user: no stack trace, no request dump."""
    status = getattr(exc, "status_code", None)
    if isinstance(exc, litellm.RateLimitError):
        return "rate_limited", "The model provider is rate-limiting requests. Try again in a moment."
    if isinstance(exc, litellm.AuthenticationError):
        return "auth", "The model provider rejected the API key. An administrator needs to check it."
    if isinstance(exc, litellm.NotFoundError):
        return "not_found", "The model provider does not know this model. An administrator needs to check it."
    if isinstance(exc, litellm.ContextWindowExceededError):
        return "context_window", "This conversation is too long for the model. Start a new chat."
    if isinstance(exc, litellm.Timeout):
        return "timeout", "The model provider did not answer in time."
    if isinstance(exc, litellm.APIConnectionError):
        return "connection", "Could not reach the model provider."
    if isinstance(exc, RETRYABLE_ERRORS) or (isinstance(status, int) and status >= 500):
        return "unavailable", "The model provider is having trouble right now."
    detail = str(getattr(exc, "message", "") or exc).strip().splitlines()[0:1]
    text = detail[0][:300] if detail else type(exc).__name__
    return "provider_error", f"The model provider returned an error: {text}"


def rejects_stream_options(exc: BaseException) -> bool:
    text = str(getattr(exc, "message", "") or exc).lower()
    return "stream_options" in text or "include_usage" in text


def retry_after_seconds(exc: BaseException) -> float | None:
    """The wait a provider asked for, from `retry-after-ms`, or `Retry-After` in seconds or as
    an HTTP date; None if it asked for none (or sent something unreadable)."""
    for headers in _error_headers(exc):
        milliseconds = _header(headers, "retry-after-ms")
        if milliseconds is not None:
            try:
                value = float(milliseconds) / 1000
            except ValueError:
                value = math.nan
            if math.isfinite(value):
                return max(0.0, value)
        value_text = _header(headers, "retry-after")
        if value_text is None:
            continue
        try:
            seconds = float(value_text)
        except ValueError:
            try:
                when = email.utils.parsedate_to_datetime(value_text)
            except (TypeError, ValueError, IndexError):
                return None
            if when.tzinfo is None:
                when = when.replace(tzinfo=datetime.UTC)
            return max(0.0, (when - datetime.datetime.now(datetime.UTC)).total_seconds())
        return max(0.0, seconds) if math.isfinite(seconds) else None
    return None


def _error_headers(exc: BaseException) -> list[Any]:
    # LiteLLM keeps the provider's headers on the exception itself; its `response` is often a
    # stand-in without them.
    found = [getattr(exc, "litellm_response_headers", None), getattr(exc, "headers", None)]
    response = getattr(exc, "response", None)
    found.append(getattr(response, "headers", None))
    return [headers for headers in found if headers]


def _header(headers: Any, name: str) -> str | None:
    try:
        value = headers.get(name)
        if value is None and isinstance(headers, dict):
            value = next((v for k, v in headers.items() if str(k).lower() == name), None)
    except Exception:
        return None
    return str(value).strip() if value is not None else None
