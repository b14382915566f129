"""Sign-in throttling (accounts/throttle.py, core/backoff.py): failed passwords counted per
account and address and per account, with doubling waits that refuse only the guesser; made-up
bearer tokens slowed per address while valid ones always work; the client address taken from
X-Forwarded-For only behind a trusted proxy. Also: a password change revokes API tokens."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from accounts.models import AccountSettings
from accounts.throttle import KNOWN_COOKIE, account_key
from core import backoff
from hub.models import ApiToken

pytestmark = pytest.mark.django_db
PASSWORD = "correct horse battery"
LIMIT = 3
NAT = "203.0.113.7"  # one office behind one address
TOOL_URL = "/toolsets/clock_math/execute/calculate"
TOOL_BODY = {"params": {"expression": "6*7"}}


@pytest.fixture(autouse=True)
def _limits(settings: Any) -> None:
    settings.SIGNIN_FREE_FAILURES = LIMIT
    settings.SIGNIN_ACCOUNT_FREE_FAILURES = 100
    settings.TOKEN_FREE_FAILURES = LIMIT
    settings.SIGNIN_FIRST_DELAY_S = 30
    settings.SIGNIN_MAX_DELAY_S = 900


class Clock:
    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        import time

        self.now = time.time()
        monkeypatch.setattr(backoff, "_now", lambda: self.now)

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    return Clock(monkeypatch)


def _client(address: str = NAT, **extra: Any) -> Client:
    return Client(REMOTE_ADDR=address, **extra)


def _sign_in(client: Client, username: str, password: str, path: str = "/login/") -> Any:
    return client.post(path, {"username": username, "password": password})


def _guess_until_refused(client: Client, username: str, path: str = "/login/") -> Any:
    for _ in range(LIMIT - 1):
        response = _sign_in(client, username, "wrong", path)
        assert response.status_code == 200
    return _sign_in(client, username, "wrong", path)


def _bob() -> Any:
    return get_user_model().objects.create_user("bob", password=PASSWORD)


# --- Passwords: only the guesser waits -----------------------------------------------------------


def test_the_guesser_waits_even_with_the_right_password(user: Any) -> None:
    client = _client()
    for _ in range(LIMIT - 1):
        response = _sign_in(client, "alice", "wrong")
        assert "Please enter a correct username and password" in response.content.decode()

    tripping = _sign_in(client, "alice", "wrong")
    refused = _sign_in(client, "alice", PASSWORD)

    for response in (tripping, refused):
        assert response.status_code == 429
        page = response.content.decode()
        assert "Too many failed sign-in attempts for this account. Try again in 30 seconds." in page
        assert 'id="id_username"' in page
        assert response["Retry-After"] == "30"
    assert "_auth_user_id" not in client.session


def test_a_bystander_behind_the_same_address_signs_in_while_the_guesser_waits(user: Any) -> None:
    _bob()
    guesser = _client()
    for n in range(LIMIT + 2):
        _sign_in(guesser, f"guess{n}", "wrong")  # many names: still no lock on the address
    assert _guess_until_refused(guesser, "alice").status_code == 429

    colleague = _client()  # another browser in the same office: the same address
    assert _sign_in(colleague, "bob", PASSWORD).status_code == 302
    assert _sign_in(guesser, "alice", PASSWORD).status_code == 429


def test_the_owner_signs_in_from_elsewhere_while_the_guesser_waits(user: Any) -> None:
    guesser = _client()
    assert _guess_until_refused(guesser, "alice").status_code == 429

    assert _sign_in(_client("192.0.2.50"), "alice", PASSWORD).status_code == 302
    assert _sign_in(guesser, "alice", PASSWORD).status_code == 429


def test_guessing_an_administrators_password_does_not_lock_the_administrator_out(admin_user: Any) -> None:
    guesser = _client()
    assert _guess_until_refused(guesser, "admin", "/admin/login/").status_code == 429
    refused = _sign_in(guesser, "admin", "password", "/admin/login/")
    assert refused.status_code == 429 and 'href="/admin/login/"' in refused.content.decode()

    admin = _client("192.0.2.60")
    assert _sign_in(admin, "admin", "password", "/admin/login/").status_code == 302
    assert admin.get("/admin/").status_code == 200


def test_the_wait_doubles_with_each_failure_up_to_the_cap(user: Any, clock: Clock, settings: Any) -> None:
    settings.SIGNIN_MAX_DELAY_S = 200
    client = _client()
    assert _guess_until_refused(client, "alice")["Retry-After"] == "30"
    waits = []
    for _ in range(4):
        clock.advance(int(_sign_in(client, "alice", "wrong")["Retry-After"]))  # the wait, served
        response = _sign_in(client, "alice", "wrong")
        assert response.status_code == 429
        waits.append(int(response["Retry-After"]))

    assert waits == [60, 120, 200, 200]
    assert "Try again in 4 minutes." in response.content.decode()


def test_refused_attempts_are_not_counted_and_the_wait_passes(user: Any, clock: Clock) -> None:
    client = _client()
    _guess_until_refused(client, "alice")
    for _ in range(5):
        assert _sign_in(client, "alice", "wrong")["Retry-After"] in ("30", "29")
    clock.advance(31)

    assert _sign_in(client, "alice", PASSWORD).status_code == 302


def test_per_account_waits_grow_across_addresses_but_spare_a_browser_that_signed_in_before(
    user: Any, clock: Clock, settings: Any
) -> None:
    settings.SIGNIN_ACCOUNT_FREE_FAILURES = 4
    owner = _client("192.0.2.10")
    assert _sign_in(owner, "alice", PASSWORD).status_code == 302
    remembered = owner.cookies[KNOWN_COOKIE].value
    owner = _client("192.0.2.11")  # signed out, on another network, the same browser
    owner.cookies[KNOWN_COOKIE] = remembered
    # Spread over many addresses, never more than one failure each.
    for n in range(3):
        assert _sign_in(_client(f"198.51.100.{n}"), "alice", "wrong").status_code == 200
    assert _sign_in(_client("198.51.100.3"), "Alice", "wrong")["Retry-After"] == "30"  # case-blind
    assert _sign_in(_client("198.51.100.4"), "alice", PASSWORD).status_code == 429
    clock.advance(30)
    assert _sign_in(_client("198.51.100.5"), "alice", "wrong")["Retry-After"] == "60"
    clock.advance(60)
    assert _sign_in(_client("198.51.100.6"), "alice", "wrong")["Retry-After"] == "120"

    # The owner's browser has signed in to this account before: it is not held by the attack.
    assert _sign_in(owner, "alice", PASSWORD).status_code == 302
    # Nor is another account.
    _bob()
    assert _sign_in(_client("198.51.100.7"), "bob", PASSWORD).status_code == 302


def test_a_forged_known_browser_cookie_is_ignored(user: Any, settings: Any) -> None:
    settings.SIGNIN_ACCOUNT_FREE_FAILURES = 2
    for n in range(2):
        _sign_in(_client(f"198.51.100.{n}"), "alice", "wrong")
    forger = _client("198.51.100.9")
    forger.cookies[KNOWN_COOKIE] = f'["{account_key("alice")}"]'
    assert _sign_in(forger, "alice", PASSWORD).status_code == 429


def test_a_successful_sign_in_clears_the_failures(user: Any) -> None:
    client = _client()
    for _ in range(LIMIT - 1):
        _sign_in(client, "alice", "wrong")
    assert _sign_in(client, "alice", PASSWORD).status_code == 302
    client.logout()

    for _ in range(LIMIT - 1):
        assert _sign_in(client, "alice", "wrong").status_code == 200
    assert _sign_in(client, "alice", PASSWORD).status_code == 302


def test_refused_sign_ups_count_for_that_username_from_that_address(user: Any) -> None:
    AccountSettings.objects.update_or_create(pk=1, defaults={"open_signup": True})
    client = _client()
    taken = {"username": "alice", "password1": "a good long phrase", "password2": "a good long phrase"}
    for _ in range(LIMIT - 1):
        assert client.post("/signup/", taken).status_code == 400

    probing = client.post("/signup/", taken)
    assert probing.status_code == 429 and "Too many failed sign-in attempts" in probing.content.decode()
    assert client.post("/signup/", taken).status_code == 429
    fresh = {**taken, "username": "newcomer"}
    assert client.post("/signup/", fresh).status_code == 302  # another name from the office: fine
    assert get_user_model().objects.filter(username="newcomer").exists()


# --- Bearer tokens -------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)  # the API runs the tool in another thread
def test_a_valid_token_always_works_from_an_address_sending_made_up_ones(user: Any, clock: Clock) -> None:
    _, token = ApiToken.issue(user, "script")
    client = _client()

    def call(secret: str) -> Any:
        return client.post(TOOL_URL, TOOL_BODY, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {secret}")

    assert [call(f"tsk_wrong{n}").status_code for n in range(LIMIT - 1)] == [401] * (LIMIT - 1)
    refused = call("tsk_madeup")
    assert refused.status_code == 429 and refused["Retry-After"] == "30"
    assert refused.json()["error"]["type"] == "rate_limit_error"
    assert "Too many invalid tokens from your address. Try again in 30 seconds." in refused.json()["error"]["message"]

    fine = call(token)  # the colleague's script behind the same address
    assert fine.status_code == 200 and fine.json()["result"]["result"] == 42
    assert call("tsk_another").status_code == 429
    clock.advance(30)
    assert call("tsk_after").status_code == 429 and call("x")["Retry-After"] == "60"


@pytest.mark.django_db(transaction=True)
def test_at_mcp_a_valid_token_works_and_made_up_ones_get_429(user: Any, rf: Any) -> None:
    from hub.caller import resolve

    _, api_token = ApiToken.issue(user, "script")
    for wrong in ("tsk_wrong", "oauth-wrong", "x"):
        request = rf.post("/mcp", HTTP_AUTHORIZATION=f"Bearer {wrong}", REMOTE_ADDR=NAT)
        assert resolve(request, oauth_tokens=True) is None
    assert backoff.refused(request) == 30
    good = rf.post("/mcp", HTTP_AUTHORIZATION=f"Bearer {api_token}", REMOTE_ADDR=NAT)
    assert resolve(good, oauth_tokens=True) is not None and not backoff.refused(good)


# --- The client address behind proxies ------------------------------------------------------------


def test_behind_a_trusted_proxy_the_forwarded_client_is_counted_not_the_proxy(user: Any, settings: Any) -> None:
    settings.TRUSTED_PROXIES = ["10.0.0.0/8"]
    # Right to left, skipping trusted hops: the client wrote "192.0.2.99" itself, so it is ignored.
    via = {"HTTP_X_FORWARDED_FOR": "192.0.2.99, 203.0.113.9, 10.0.0.3"}
    guesser = _client("10.0.0.2", **via)
    assert _guess_until_refused(guesser, "alice").status_code == 429

    elsewhere = _client("10.0.0.2", HTTP_X_FORWARDED_FOR="203.0.113.10")
    assert _sign_in(elsewhere, "alice", PASSWORD).status_code == 302
    again = _client("10.0.0.2", HTTP_X_FORWARDED_FOR="192.0.2.1, 203.0.113.9")
    assert _sign_in(again, "alice", PASSWORD).status_code == 429


def test_from_an_untrusted_peer_x_forwarded_for_is_ignored(user: Any, settings: Any) -> None:
    settings.TRUSTED_PROXIES = ["10.0.0.0/8"]
    guesser = _client("198.51.100.20")
    for n in range(LIMIT):
        # A new made-up forwarded address each time: still one guesser, counted by its connection.
        guesser.defaults["HTTP_X_FORWARDED_FOR"] = f"192.0.2.{n}"
        response = _sign_in(guesser, "alice", "wrong")
    assert response.status_code == 429
    # Nor can it name someone else's address to get them refused.
    assert _sign_in(_client("192.0.2.0"), "alice", PASSWORD).status_code == 302


# --- Password changes ------------------------------------------------------------------------------


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
