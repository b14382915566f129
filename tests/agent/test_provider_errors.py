"""Telling provider failures apart (agent/provider_errors.py): the message a person is
shown, the wait a provider asked for, and a server that does not know `stream_options`."""

from __future__ import annotations

import datetime
from email.utils import format_datetime

import litellm
import pytest

from agent.exceptions import ProviderError
from agent.llm import LiteLLMModel, ModelConfig
from agent.provider_errors import describe_error, rejects_stream_options, retry_after_seconds

from .helpers import USER, Script, rate_limited


async def test_provider_error_message_is_safe_to_show() -> None:
    script = Script(litellm.BadRequestError("invalid 'messages'", llm_provider="openai", model="x"))
    model = LiteLLMModel(ModelConfig(model="scripted/x", retries=0, backoff_s=0), completion=script)
    with pytest.raises(ProviderError) as info:
        async for _ in model.stream(USER, None):
            pass
    assert info.value.message.startswith("The model provider returned an error")


def test_retry_after_in_seconds_milliseconds_and_http_date() -> None:
    assert retry_after_seconds(rate_limited({"Retry-After": "7"})) == 7
    assert retry_after_seconds(rate_limited({"retry-after-ms": "1500"})) == 1.5
    when = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=20)
    from_date = retry_after_seconds(rate_limited({"Retry-After": format_datetime(when, usegmt=True)}))
    assert from_date is not None and 17 < from_date <= 20
    assert retry_after_seconds(rate_limited({"Retry-After": "soon"})) is None
    assert retry_after_seconds(rate_limited({})) is None


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (litellm.RateLimitError, "rate_limited"),
        (litellm.AuthenticationError, "auth"),
        (litellm.NotFoundError, "not_found"),
        # A BadRequestError too, but one a person can act on: not the generic provider error.
        (litellm.ContextWindowExceededError, "context_window"),
        (litellm.Timeout, "timeout"),
        (litellm.APIConnectionError, "connection"),
        (litellm.ServiceUnavailableError, "unavailable"),
        (litellm.BadGatewayError, "unavailable"),
    ],
)
def test_each_kind_of_provider_failure_has_its_own_plain_message(error: type[Exception], kind: str) -> None:
    found, message = describe_error(error("x", llm_provider="openai", model="m"))  # type: ignore[call-arg]
    assert found == kind
    assert "x" not in message.split() and "litellm" not in message.lower()


def test_an_unknown_server_error_is_described_by_its_status() -> None:
    class Upstream(Exception):
        status_code = 503

    assert describe_error(Upstream("stack dump here"))[0] == "unavailable"


def test_a_provider_error_shows_only_the_first_line_and_at_most_300_characters() -> None:
    multi = litellm.BadRequestError("bad field\nTraceback (most recent call last):", llm_provider="openai", model="m")
    kind, message = describe_error(multi)
    assert kind == "provider_error"
    assert message.endswith("bad field") and "Traceback" not in message
    long = describe_error(litellm.BadRequestError("y" * 1000, llm_provider="openai", model="m"))[1]
    prefix = "The model provider returned an error: "
    assert long.startswith(prefix) and len(long) == len(prefix) + 300
    assert describe_error(ValueError(""))[1] == prefix + "ValueError"


@pytest.mark.parametrize(
    ("text", "rejects"),
    [
        ("Unrecognized request argument supplied: stream_options", True),
        ("include_usage is not supported by this server", True),
        ("max_tokens is too large", False),
    ],
)
def test_a_server_refusing_usage_reports_is_recognised(text: str, rejects: bool) -> None:
    error = litellm.BadRequestError(text, llm_provider="openai", model="m")
    assert rejects_stream_options(error) is rejects


def test_retry_after_is_read_from_a_plain_headers_dict_in_any_case() -> None:
    class Refused(Exception):
        headers = {"Retry-After": "4"}

    assert retry_after_seconds(Refused()) == 4
    negative = rate_limited({"Retry-After": "-3"})
    assert retry_after_seconds(negative) == 0
