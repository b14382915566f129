"""Sign-in throttling (django-axes, chat/accounts/throttle.py): failed attempts per account and
per client address, on the sign-in page, the admin's, sign-up and API tokens; a clear message,
a lockout that expires, and a password change that revokes API tokens."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from chat.accounts.models import AccountSettings
from toolsets.models import ApiToken

pytestmark = pytest.mark.django_db
PASSWORD = "correct horse battery"
LIMIT = 3


@pytest.fixture(autouse=True)
def _limit(settings: Any) -> None:
    settings.AXES_FAILURE_LIMIT = LIMIT


def _client(address: str = "203.0.113.7") -> Client:
    return Client(REMOTE_ADDR=address)


def _sign_in(client: Client, username: str, password: str, path: str = "/login/") -> Any:
    return client.post(path, {"username": username, "password": password})


def test_the_attempt_after_the_limit_is_refused_even_with_the_right_password(user: Any) -> None:
    client = _client()
    for _ in range(LIMIT - 1):
        response = _sign_in(client, "alice", "wrong")
        assert response.status_code == 200
        assert "Please enter a correct username and password" in response.content.decode()

    locking = _sign_in(client, "alice", "wrong")
    refused = _sign_in(client, "alice", PASSWORD)

    for response in (locking, refused):
        assert response.status_code == 429
        page = response.content.decode()
        assert "Too many failed sign-in attempts for this account or from your address" in page
        assert "Try again in 15 minutes." in page and 'id="id_username"' in page
        assert response["Retry-After"] == "900"
    assert "_auth_user_id" not in client.session


def test_an_account_is_locked_whichever_addresses_the_attempts_come_from(user: Any) -> None:
    for n in range(LIMIT):
        _sign_in(_client(f"198.51.100.{n}"), "alice", "wrong")

    assert _sign_in(_client("192.0.2.200"), "alice", PASSWORD).status_code == 429
    # Another account from a fresh address is unaffected.
    get_user_model().objects.create_user("bob", password=PASSWORD)
    assert _sign_in(_client("192.0.2.201"), "bob", PASSWORD).status_code == 302


def test_an_address_is_locked_whichever_accounts_it_tries(user: Any) -> None:
    client = _client()
    for n in range(LIMIT):
        _sign_in(client, f"guess{n}", "wrong")

    assert _sign_in(client, "alice", PASSWORD).status_code == 429
    assert _sign_in(_client("192.0.2.50"), "alice", PASSWORD).status_code == 302


def test_behind_a_trusted_proxy_the_client_is_counted_not_the_proxy(user: Any, settings: Any) -> None:
    settings.TRUSTED_PROXIES = ["10.0.0.0/8"]
    for _ in range(LIMIT):
        Client(REMOTE_ADDR="10.0.0.2", HTTP_X_FORWARDED_FOR="203.0.113.9").post(
            "/login/", {"username": "nobody", "password": "x"}
        )

    other_client = Client(REMOTE_ADDR="10.0.0.2", HTTP_X_FORWARDED_FOR="203.0.113.10")
    assert _sign_in(other_client, "alice", PASSWORD).status_code == 302
    again = Client(REMOTE_ADDR="10.0.0.2", HTTP_X_FORWARDED_FOR="203.0.113.9")
    assert _sign_in(again, "alice", PASSWORD).status_code == 429


def test_the_lockout_expires(user: Any, settings: Any) -> None:
    settings.AXES_COOLOFF_TIME = timedelta(seconds=1)
    client = _client()
    for _ in range(LIMIT):
        _sign_in(client, "alice", "wrong")
    assert _sign_in(client, "alice", PASSWORD).status_code == 429

    time.sleep(1.2)

    assert _sign_in(client, "alice", PASSWORD).status_code == 302


def test_a_successful_sign_in_clears_the_failures(user: Any) -> None:
    client = _client()
    for _ in range(LIMIT - 1):
        _sign_in(client, "alice", "wrong")
    assert _sign_in(client, "alice", PASSWORD).status_code == 302
    client.logout()

    for _ in range(LIMIT - 1):
        assert _sign_in(client, "alice", "wrong").status_code == 200
    assert _sign_in(client, "alice", PASSWORD).status_code == 302


def test_the_admin_sign_in_is_throttled(admin_user: Any) -> None:
    client = _client()
    for _ in range(LIMIT):
        _sign_in(client, "admin", "wrong", "/admin/login/")

    response = _sign_in(client, "admin", "password", "/admin/login/")

    assert response.status_code == 429
    page = response.content.decode()
    assert "Too many failed sign-in attempts" in page and 'href="/admin/login/"' in page
    assert client.get("/admin/").status_code != 200


@pytest.mark.django_db(transaction=True)  # the API runs the tool in another thread
def test_failed_api_tokens_lock_the_address_out(user: Any) -> None:
    _, token = ApiToken.issue(user, "script")
    client = _client()
    url = "/toolsets/clock_math/execute/calculate"
    body = {"params": {"expression": "6*7"}}
    for n in range(LIMIT):
        wrong = client.post(url, body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer tsk_wrong{n}")
        assert wrong.status_code in (401, 429)

    refused = client.post(url, body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}")

    assert refused.status_code == 429
    assert refused.json()["error"]["type"] == "rate_limit_error"
    assert "Try again in 15 minutes" in refused.json()["error"]["message"]
    fine = _client("192.0.2.9").post(url, body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert fine.status_code == 200 and fine.json()["result"]["result"] == 42


def test_refused_sign_ups_count_and_a_locked_address_cannot_sign_up(user: Any) -> None:
    AccountSettings.objects.update_or_create(pk=1, defaults={"open_signup": True})
    client = _client()
    taken = {"username": "alice", "password1": "a good long phrase", "password2": "a good long phrase"}
    for _ in range(LIMIT - 1):
        assert client.post("/signup/", taken).status_code == 400

    assert client.post("/signup/", taken).status_code == 429
    fresh = {**taken, "username": "newcomer"}
    response = client.post("/signup/", fresh)
    assert response.status_code == 429 and "Too many failed sign-in attempts" in response.content.decode()
    assert not get_user_model().objects.filter(username="newcomer").exists()


def test_a_password_change_revokes_the_users_api_tokens(user: Any, other_user: Any) -> None:
    _, mine = ApiToken.issue(user, "laptop")
    ApiToken.issue(user, "ci")
    _, theirs = ApiToken.issue(other_user, "theirs")
    client = _client()
    client.force_login(user)

    response = client.post(
        "/account/password/",
        {"old_password": PASSWORD, "new_password1": "a brand new phrase", "new_password2": "a brand new phrase"},
        follow=True,
    )

    assert response.status_code == 200
    assert "Your 2 API tokens were revoked" in response.content.decode()
    assert ApiToken.authenticate(mine) is None
    assert ApiToken.authenticate(theirs) is not None
    assert not ApiToken.objects.filter(user=user, revoked_at=None).exists()


def test_any_way_of_setting_a_password_revokes_tokens(user: Any) -> None:
    _, token = ApiToken.issue(user, "laptop")
    user.first_name = "Alice"
    user.save()  # other changes keep them
    assert ApiToken.authenticate(token) is not None

    user.set_password("set from the shell or the admin")
    user.save()

    assert ApiToken.authenticate(token) is None


def test_the_account_page_says_a_password_change_revokes_tokens(user: Any) -> None:
    client = _client()
    client.force_login(user)
    assert "your API tokens are revoked" in client.get("/account/").content.decode()


def test_a_sign_in_without_a_client_address_is_recorded_without_one(user: Any) -> None:
    """A session opened with no connection (the test client's force_login, a management
    command) has no address: axes records none rather than a placeholder, which PostgreSQL's
    address column refuses."""
    from axes.models import AccessLog

    from chat.accounts.throttle import client_address

    client = Client()
    client.force_login(user)
    assert client.get("/").status_code in (200, 302)
    assert not AccessLog.objects.exclude(ip_address=None).filter(username=user.username).exists()

    class Bare:
        META: dict[str, str] = {}

    assert client_address(Bare()) is None
    assert client_address(type("R", (), {"META": {"REMOTE_ADDR": "198.51.100.4"}})()) == "198.51.100.4"
