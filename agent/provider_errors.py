"""How provider failures are told apart and described: which are worth another try, which no
retry will fix, the wait a provider asked for, and a message fit to show a person."""

from __future__ import annotations

import datetime
import email.utils
import json
import math
from typing import Any

import aiohttp
import httpx
from litellm import exceptions as llm_errors

from core import redact

# Errors worth another try: the provider is busy or briefly unreachable.
RETRYABLE_ERRORS: tuple[type[BaseException], ...] = (
    llm_errors.RateLimitError,
    llm_errors.InternalServerError,
    llm_errors.ServiceUnavailableError,
    llm_errors.BadGatewayError,
    llm_errors.APIConnectionError,
    llm_errors.Timeout,
)
# Errors no retry will fix: configuration or request problems.
ABORT_ERRORS: tuple[type[BaseException], ...] = (
    llm_errors.AuthenticationError,
    llm_errors.PermissionDeniedError,
    llm_errors.NotFoundError,
    llm_errors.BadRequestError,
    llm_errors.ContextWindowExceededError,
    llm_errors.ContentPolicyViolationError,
    llm_errors.UnsupportedParamsError,
    llm_errors.BudgetExceededError,
)


def describe_error(exc: BaseException) -> tuple[str, str]:
    """A (kind, message) pair fit to show a user: no stack trace, no request dump."""
    status = getattr(exc, "status_code", None)
    if isinstance(exc, llm_errors.RateLimitError):
        return "rate_limited", "The model provider is rate-limiting requests. Try again in a moment."
    if isinstance(exc, llm_errors.AuthenticationError):
        return "auth", "The model provider rejected the API key. An administrator needs to check it."
    if isinstance(exc, llm_errors.NotFoundError):
        return "not_found", "The model provider does not know this model. An administrator needs to check it."
    if isinstance(exc, llm_errors.ContextWindowExceededError):
        return "context_window", "This conversation is too long for the model. Start a new chat."
    if isinstance(exc, llm_errors.Timeout):
        return "timeout", "The model provider did not answer in time."
    if isinstance(exc, llm_errors.APIConnectionError):
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


# --- Errors of Tessera's own reader (openai_stream) ----------------------------------------
# They are raised as the LiteLLM exception LiteLLM's client would raise for the same response,
# with the same message shape, so everything above treats both paths alike.


def error_from_response(
    status: int, text: str, headers: Any, provider: str, model: str, label: str, secret: str = ""
) -> BaseException:
    """The LiteLLM exception for an HTTP error answer (status, body text, headers)."""
    message = _hide(_status_message(status, text), secret)
    body = _hide(text, secret)
    request = httpx.Request("POST", "https://provider.invalid/chat/completions")
    response = httpx.Response(status, headers=dict(headers or {}), request=request)
    return _litellm_error(status, f"{label}Exception - {message}", body, provider, model, response)


def error_from_event(event: dict[str, Any], provider: str, model: str, label: str, secret: str = "") -> BaseException:
    """The exception for an `{"error": …}` event inside a stream (some servers report a failure
    that way once they have answered 200)."""
    error = event.get("error")
    code = error.get("code") if isinstance(error, dict) else None
    status = code if isinstance(code, int) and 400 <= code < 600 else 500
    text = json.dumps(event)
    return error_from_response(status, text, {}, provider, model, label, secret)


def error_from_transport(exc: BaseException, provider: str, model: str, label: str) -> BaseException:
    """The exception for a request that got no answer, or a stream that broke."""
    if isinstance(exc, httpx.TimeoutException | TimeoutError | aiohttp.ServerTimeoutError):
        return llm_errors.Timeout(message=f"{label}Exception - Request timed out.", model=model, llm_provider=provider)
    if isinstance(exc, httpx.HTTPError | aiohttp.ClientError | OSError):
        return llm_errors.APIConnectionError(
            message=f"APIConnectionError: {label}Exception - Connection error.", llm_provider=provider, model=model
        )
    return llm_errors.APIError(
        status_code=502,
        message=f"APIError: {label}Exception - The stream held a chunk that is not JSON.",
        llm_provider=provider,
        model=model,
    )


def _status_message(status: int, text: str) -> str:
    """What the openai client makes the message of an error answer: the provider's
    `error.message` when it sent one, else the status and the body."""
    try:
        body = json.loads(text)
    except ValueError:
        return text.strip() or f"Error code: {status}"
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return str(error["message"])
    return f"Error code: {status} - {body}"


def _hide(text: str, secret: str) -> str:
    # Some providers quote the key they were sent ("Incorrect API key provided: sk-…"): the one
    # redaction function every error text goes through removes it (and any other known secret).
    redact.register(secret)
    return redact.redact(text)


def _litellm_error(
    status: int, message: str, body: str, provider: str, model: str, response: httpx.Response
) -> BaseException:
    """The same choice LiteLLM's exception mapping makes for an OpenAI-compatible provider: by
    what the body says first (rate limit, context window, unknown model, content policy), then
    by status."""
    from litellm.litellm_core_utils.exception_mapping_utils import ExceptionCheckers

    text = f"{message} {body}"
    common: dict[str, Any] = {"llm_provider": provider, "model": model}
    if ExceptionCheckers.is_error_str_rate_limit(text, status_code=status):
        return llm_errors.RateLimitError(message=f"RateLimitError: {message}", response=response, **common)
    if ExceptionCheckers.is_error_str_context_window_exceeded(text):
        return llm_errors.ContextWindowExceededError(
            message=f"ContextWindowExceededError: {message}", response=response, **common
        )
    if "invalid_request_error" in text and "model_not_found" in text:
        return llm_errors.NotFoundError(message=message, response=response, **common)
    lowered = text.lower()
    if ("content_policy_violation" in text and "invalid_request_error" in text) or (
        "request was rejected as a result of the safety system" in lowered
    ):
        return llm_errors.ContentPolicyViolationError(
            message=f"ContentPolicyViolationError: {message}", response=response, **common
        )
    if status in (400, 413, 422):
        return llm_errors.BadRequestError(message=message, response=response, **common)
    if status == 401:
        return llm_errors.AuthenticationError(message=f"AuthenticationError: {message}", response=response, **common)
    if status == 404:
        return llm_errors.NotFoundError(message=f"NotFoundError: {message}", response=response, **common)
    if status in (408, 504):
        return llm_errors.Timeout(message=f"Timeout Error: {message}", exception_status_code=status, **common)
    if status == 429:
        return llm_errors.RateLimitError(message=f"RateLimitError: {message}", response=response, **common)
    if status == 500:
        return llm_errors.InternalServerError(message=f"InternalServerError: {message}", response=response, **common)
    if status == 502:
        return llm_errors.BadGatewayError(message=f"BadGatewayError: {message}", response=response, **common)
    if status == 503:
        return llm_errors.ServiceUnavailableError(
            message=f"ServiceUnavailableError: {message}", response=response, **common
        )
    return llm_errors.APIError(status_code=status, message=f"APIError: {message}", request=response.request, **common)
