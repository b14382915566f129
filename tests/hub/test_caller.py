"""One answer to "who is this bearer caller" (hub/caller.py), the same at `/v1`, `/mcp` and the
execution API."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from core import backoff
from hub.auth import SCOPE
from hub.caller import Caller, resolve
from hub.models import ApiToken


def _bearer(rf: Any, secret: str | None) -> Any:
    extra = {"HTTP_AUTHORIZATION": f"Bearer {secret}"} if secret is not None else {}
    return rf.post("/v1/chat/completions", REMOTE_ADDR="198.51.100.4", **extra)


def test_an_api_token_is_a_typed_caller_with_one_principal(user: Any, rf: Any) -> None:
    record, secret = ApiToken.issue(user, "ci", can_approve=True, tools=False, agents=True)
    for oauth_tokens in (False, True):  # the same caller at every door
        caller = resolve(_bearer(rf, secret), oauth_tokens=oauth_tokens)
        assert caller == Caller(
            user_id=user.pk, can_approve=True, tools=False, agents=True, token_id=record.pk, token_name="ci"
        )
        assert caller.principal == f"token:{record.pk}:user:{user.pk}"
        assert caller.label == "token ci"
    record.refresh_from_db()
    assert record.last_used_at is not None
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(caller, "user_id", 0)  # noqa: B010 (a frozen dataclass refuses it at run time)


def test_an_oauth_client_is_keyed_by_its_client_id_not_its_name() -> None:
    one = Caller(user_id=3, can_approve=False, tools=True, agents=True, oauth_client_id="abc", oauth_client="Zed")
    other = dataclasses.replace(one, oauth_client_id="def")
    assert one.principal == "oauth:abc:user:3" and other.principal != one.principal
    assert one.label == "OAuth client Zed"


def test_only_mcp_takes_oauth_tokens_and_a_bare_request_there_is_no_failed_sign_in(
    user: Any, rf: Any, settings: Any
) -> None:
    settings.TOKEN_FREE_FAILURES = 2
    # Outside /mcp, anything but an API token counts as made up, a missing one too.
    for secret in ("an-oauth-looking-token", None):
        assert resolve(_bearer(rf, secret)) is None
    refused = _bearer(rf, "another")
    assert resolve(refused) is None and backoff.refused(refused)
    # At /mcp a request with no credentials starts the authorization flow: not counted.
    settings.TOKEN_FREE_FAILURES = 1
    for _ in range(3):
        assert resolve(rf.post("/mcp", REMOTE_ADDR="198.51.100.5"), oauth_tokens=True) is None
    assert backoff.wait(SCOPE, "198.51.100.5") == 0
    assert (
        resolve(rf.post("/mcp", HTTP_AUTHORIZATION="Bearer made-up", REMOTE_ADDR="198.51.100.5"), oauth_tokens=True)
        is None
    )
    assert backoff.wait(SCOPE, "198.51.100.5") > 0


@pytest.mark.django_db(transaction=True)
def test_a_token_has_one_cap_of_running_answers_whichever_door_it_comes_through(
    user: Any, rf: Any, demo_model: Any
) -> None:
    from chat.models import AppSettings
    from chat.worker import fair_share
    from chat.worker.request import TurnRequest
    from hub import turns
    from hub.schema import Conversation

    app = AppSettings.load()
    app.running_turns_per_user, app.running_turns_per_token = 5, 1
    app.save()
    _, secret = ApiToken.issue(user, "ci")
    at_v1 = resolve(_bearer(rf, secret))
    at_mcp = resolve(rf.post("/mcp", HTTP_AUTHORIZATION=f"Bearer {secret}"), oauth_tokens=True)
    assert at_v1 is not None and at_mcp is not None
    target = turns.targets(user.pk)[turns.DEFAULT_MODEL]
    conversation = Conversation(messages=[{"role": "user", "content": "hi"}], question="hi")
    turn = turns.start(at_v1, target, conversation, False, "openai: token ci")
    request = TurnRequest.of(turn)
    assert request is not None and request.principal == at_v1.principal and request.client == "openai: token ci"
    # The same token at /mcp (an agent's run) is at its cap: one count, not one per door.
    with pytest.raises(fair_share.Busy):
        turns.start(at_mcp, target, conversation, False, "mcp: token ci")
