"""A group the identity provider stops listing stops reaching anything within SSO_REVALIDATE_S:
sessions from a provider end then, and provider-given memberships no sign-in has confirmed
since are taken away on the next signed-in request or bearer token's use
(accounts/sso.py)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.contrib.sessions.backends.cache import SessionStore
from django.core.cache import cache
from django.db.models import F
from django.test import Client, RequestFactory

from accounts import sso
from accounts.models import OIDCProvider, ProviderGroup
from hub.models import ApiToken
from toolsets.models import ToolsetConfig

pytestmark = pytest.mark.django_db
# Time is moved, not waited for: every vouching is set back by the time said to pass, so a
# loaded machine's slow steps cannot make a window lapse early.
WINDOW_S = 3600
TOOL_URL = "/toolsets/clock_math/execute/calculate"
TOOL_BODY = {"params": {"expression": "6*7"}}


@pytest.fixture(autouse=True)
def _short_window(settings: Any) -> None:
    settings.SSO_REVALIDATE_S = WINDOW_S


def _provider(slug: str = "acme") -> OIDCProvider:
    return OIDCProvider.objects.create(
        slug=slug,
        label=slug,
        issuer=f"https://{slug}.example.com",
        client_id=slug,
        groups_claim="groups",
        create_groups=True,
    )


def _groups(user: Any) -> set[str]:
    return set(user.groups.values_list("name", flat=True))


def _signed_in_with(user: Any, provider: OIDCProvider, *names: str) -> None:
    sso.sync_groups(user, provider, {"groups": list(names)})


def _time_passes(seconds: float) -> None:
    ProviderGroup.objects.update(vouched_at=F("vouched_at") - timedelta(seconds=seconds))
    # The once-a-while look (sso.expire_unvouched_lately) is due again, as it would be by then.
    cache.delete_many([f"sso-vouched-look:{pk}" for pk in get_user_model().objects.values_list("pk", flat=True)])


def _window_passes() -> None:
    _time_passes(WINDOW_S + 1)


@pytest.mark.django_db(transaction=True)  # the API runs the tool in another thread
def test_a_group_removed_at_the_provider_stops_reaching_through_an_api_token() -> None:
    alice = get_user_model().objects.create_user("alice", password="a long test passphrase")
    _signed_in_with(alice, _provider(), "eng")
    ToolsetConfig.objects.create(toolset_id="clock_math").groups.add(Group.objects.get(name="eng"))
    _, token = ApiToken.issue(alice, "script")
    client = Client()

    def call() -> Any:
        return client.post(TOOL_URL, TOOL_BODY, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}")

    assert call().status_code == 200
    # The provider drops alice from eng; she does not sign in again; her script goes on.
    _window_passes()

    refused = call()
    assert refused.status_code == 403 and refused.json()["error"]["reason"] == "Not available to your groups"
    assert "eng" not in _groups(alice)


def test_a_signed_in_request_drops_groups_nobody_confirmed_but_keeps_hand_given_ones() -> None:
    alice = get_user_model().objects.create_user("alice")
    alice.groups.add(Group.objects.create(name="hand"))
    _signed_in_with(alice, _provider(), "eng")
    client = Client()
    client.force_login(alice)
    client.get("/")
    assert _groups(alice) == {"hand", "eng"}

    _window_passes()
    client.get("/")

    assert _groups(alice) == {"hand"}


def test_a_new_sign_in_that_lists_the_group_confirms_it_again() -> None:
    alice = get_user_model().objects.create_user("alice")
    acme = _provider()
    _signed_in_with(alice, acme, "eng", "ops")
    _time_passes(WINDOW_S * 0.6)
    _signed_in_with(alice, acme, "eng", "ops")  # the provider still lists both
    _time_passes(WINDOW_S * 0.6)

    assert sso.expire_unvouched(alice.pk) == set()
    assert _groups(alice) == {"eng", "ops"}


def test_a_group_another_provider_still_vouches_for_stays() -> None:
    alice = get_user_model().objects.create_user("alice")
    acme, other = _provider(), _provider("other")
    _signed_in_with(alice, acme, "eng")
    # Both providers gave it (test_sso.py: a provider records only what it added).
    alice.groups.remove(Group.objects.get(name="eng"))
    _signed_in_with(alice, other, "eng")
    _window_passes()
    _signed_in_with(alice, other, "eng")  # only the other one confirms it

    assert sso.expire_unvouched(alice.pk) == set()
    assert _groups(alice) == {"eng"}


def test_a_session_from_a_provider_ends_when_its_word_runs_out(settings: Any) -> None:
    from allauth.socialaccount.models import SocialAccount, SocialLogin

    settings.SSO_REVALIDATE_S = 3600
    alice = get_user_model().objects.create_user("alice")
    _provider()
    request = RequestFactory().get("/accounts/oidc/acme/login/callback/")
    request.session = SessionStore()
    login = SocialLogin(account=SocialAccount(provider="acme", uid="s-1", extra_data={}), user=alice)

    sso._signed_in(sender=None, request=request, user=alice, sociallogin=login)

    assert request.session.get_expiry_age() == 3600
